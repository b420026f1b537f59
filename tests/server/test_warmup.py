"""The warm-up proves the engine and the G2P at every start, and measures nothing (the fake engine stands in
for the model, but for the last test)."""

from __future__ import annotations

import importlib.util

import pytest

from koe.audio.formats import AudioFormat
from koe.engine.timing import WordSpan
from koe.errors import SynthesisError
from koe.pipeline.speech import Speech
from koe.server import warmup
from koe.server.warmup import ENGINE_PROOF, prove, prove_engine
from support.fake import FakeEngine, FakeG2P, fake_speech, fake_voices


def test_a_start_whose_engine_was_not_proven_decodes_the_engines_proof_alone() -> None:
    engine = FakeEngine()
    prove(fake_speech(engine), "af_heart")
    assert engine.worked == [ENGINE_PROOF]


def test_a_start_whose_engine_was_proven_beside_the_g2p_decodes_nothing() -> None:
    engine = FakeEngine()
    prove(fake_speech(engine), "af_heart", engine_proven=True)
    assert engine.calls == 0


def test_an_engine_that_speaks_nothing_fails_its_proof() -> None:
    class Mute(FakeEngine):
        def audio(self, *args: object, **kwargs: object) -> object:
            return super().audio(*args, **kwargs)[:0]  # type: ignore[arg-type]

    with pytest.raises(SynthesisError, match="proof"):
        prove_engine(Mute(), fake_voices(), "af_heart")


def test_a_g2p_that_reads_nothing_fails_its_proof() -> None:
    class Deaf(FakeG2P):
        def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
            return "", []

    speech = Speech(FakeEngine(), fake_voices(), {"en-us": Deaf("en-us")})
    with pytest.raises(SynthesisError, match="G2P read nothing"):
        prove(speech, "af_heart", engine_proven=True)


def test_the_real_engine_speaks_its_proof(speech: Speech) -> None:
    prove_engine(speech.engine, speech.voices, "af_heart")


def test_without_pyav_the_warm_up_imports_what_it_can_and_encodes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GPU kit installs koe without PyAV: its server must still load (its ladder asks for PCM only)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "av" else find_spec(name))
    encoded: list[object] = []
    monkeypatch.setattr(warmup, "encode_whole", lambda audio, fmt: encoded.append(fmt))
    warmup.import_first_use_modules()
    assert encoded == []
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    warmup.import_first_use_modules()
    assert set(encoded) == set(AudioFormat)
