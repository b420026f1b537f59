"""The warm-up proves the engine and the G2P at every start, and times its two utterances only where no
earlier start on this machine kept their timings (the fake engine stands in for the model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koe.errors import SynthesisError
from koe.machine import Measured
from koe.pipeline.speech import Speech
from koe.server.warmup import ENGINE_PROOF, PROOF, TIMING, prove_engine, warm_up
from support.fake import FakeEngine, fake_speech, fake_voices

KEY = {"what": "segment costs", "speech": "fake"}


def test_a_first_start_proves_the_engine_then_times_both_utterances_and_keeps_their_timings(
    tmp_path: Path,
) -> None:
    engine = FakeEngine(delay_s=0.01)
    measured = Measured(tmp_path, KEY)
    warm_up(fake_speech(engine), "af_heart", False, measured)
    kept = measured.read()
    assert engine.worked[0] == ENGINE_PROOF and engine.calls == 3
    assert kept is not None and [sample[0] for sample in kept["samples"]] == [len(PROOF), len(TIMING)]


def test_a_later_start_whose_engine_was_proven_beside_the_g2p_decodes_nothing_and_fits_the_kept_timings(
    tmp_path: Path,
) -> None:
    measured = Measured(tmp_path, KEY)
    first = warm_up(fake_speech(FakeEngine(delay_s=0.01)), "af_heart", False, measured)
    engine = FakeEngine(delay_s=0.2)  # a slower engine now: its speed does not enter the fit
    later = warm_up(fake_speech(engine), "af_heart", False, measured, engine_proven=True)
    assert engine.calls == 0
    fitted = (first.synthesis.fixed_s, first.synthesis.per_unit_s, first.chars_per_s)
    assert (later.synthesis.fixed_s, later.synthesis.per_unit_s, later.chars_per_s) == fitted


def test_a_later_start_whose_engine_was_not_proven_decodes_the_proof_alone(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    warm_up(fake_speech(FakeEngine()), "af_heart", False, measured)
    engine = FakeEngine()
    warm_up(fake_speech(engine), "af_heart", False, measured)
    assert engine.worked == [ENGINE_PROOF]


class _Preparing(FakeEngine):
    """Records its preparation among the decodes, in order."""

    def prepare(self, style: object) -> None:
        self.worked.append("prepare")


def test_a_windowed_first_start_prepares_the_windows_after_the_timed_utterances(tmp_path: Path) -> None:
    engine = _Preparing()
    warm_up(fake_speech(engine), "af_heart", True, Measured(tmp_path, KEY))
    # the windows are timed on the timed utterances' decodes, not on a probe decoded before them
    assert engine.calls == 3 and engine.worked[-1] == "prepare" and engine.worked.count("prepare") == 1


def test_a_windowed_later_start_only_prepares_and_an_unwindowed_one_does_not(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    warm_up(fake_speech(FakeEngine()), "af_heart", False, measured)
    windowed, whole = _Preparing(), _Preparing()
    warm_up(fake_speech(windowed), "af_heart", True, measured, engine_proven=True)
    warm_up(fake_speech(whole), "af_heart", False, measured, engine_proven=True)
    assert windowed.worked == ["prepare"] and whole.worked == []


def test_kept_timings_of_other_utterances_or_damaged_ones_are_timed_again(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    for kept in (
        {"samples": [[len(TIMING), 1.0, 0.5], [len(PROOF), 1.0, 0.5]]},
        {"samples": [[len(PROOF), 1.0, 0.5], [1, "x", None]]},
        {"samples": [[len(PROOF), 1.0, 0.5]]},
    ):
        measured.write(kept)
        engine = FakeEngine()
        warm_up(fake_speech(engine), "af_heart", False, measured, engine_proven=True)
        assert engine.calls == 2


def test_without_a_record_every_start_times_both(tmp_path: Path) -> None:
    for _ in range(2):
        engine = FakeEngine()
        warm_up(fake_speech(engine), "af_heart", False)
        assert engine.calls == 3


def test_an_engine_that_speaks_nothing_fails_its_proof() -> None:
    class Mute(FakeEngine):
        def audio(self, *args: object, **kwargs: object) -> object:
            return super().audio(*args, **kwargs)[:0]  # type: ignore[arg-type]

    with pytest.raises(SynthesisError, match="proof"):
        prove_engine(Mute(), fake_voices(), "af_heart")


def test_the_real_engine_speaks_its_proof(speech: Speech) -> None:
    prove_engine(speech.engine, speech.voices, "af_heart")
