"""The warm-up speaks its proof at every start, and times the longer utterance only where no earlier start
on this machine kept its timing (the fake engine stands in for the model)."""

from __future__ import annotations

from pathlib import Path

from koe.machine import Measured
from koe.server.warmup import PROOF, TIMING, warm_up
from support.fake import FakeEngine, fake_speech

KEY = {"what": "segment costs", "speech": "fake"}


def test_a_first_start_times_both_utterances_and_keeps_the_longer_ones_timing(tmp_path: Path) -> None:
    engine = FakeEngine(delay_s=0.01)
    measured = Measured(tmp_path, KEY)
    warm_up(fake_speech(engine), "af_heart", False, measured)
    kept = measured.read()
    assert engine.calls == 2
    assert kept is not None and kept["text"] == TIMING and kept["sample"][0] == len(TIMING)


def test_a_later_start_speaks_only_the_proof_and_fits_the_kept_timing(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    first = warm_up(fake_speech(FakeEngine(delay_s=0.01)), "af_heart", False, measured)
    engine = FakeEngine(delay_s=0.01)
    later = warm_up(fake_speech(engine), "af_heart", False, measured)
    assert engine.calls == 1  # the proof alone
    # the kept sample sets how much speech a text makes, as the timed one did
    assert later.chars_per_s == first.chars_per_s


def test_a_kept_timing_of_another_utterance_or_a_damaged_one_is_timed_again(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    for kept in (
        {"text": PROOF, "sample": [len(PROOF), 1.0, 0.5]},
        {"text": TIMING, "sample": [1, "x", None]},
    ):
        measured.write(kept)
        engine = FakeEngine()
        warm_up(fake_speech(engine), "af_heart", False, measured)
        assert engine.calls == 2


def test_without_a_record_every_start_times_both(tmp_path: Path) -> None:
    for _ in range(2):
        engine = FakeEngine()
        warm_up(fake_speech(engine), "af_heart", False)
        assert engine.calls == 2
