from __future__ import annotations

from pathlib import Path

import pytest

from koe.engine.assets import install_voices
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.engine import OnnxEngine
from koe.engine.voices import VOICES, VoiceBank
from koe.pipeline.speech import Speech


@pytest.fixture(scope="session")
def installed_voices() -> Path:
    """The verified voice directory, all 54 voices (fetched once with npm pack, then cached)."""
    return install_voices(list(VOICES))


@pytest.fixture(scope="session")
def voice_bank(installed_voices: Path) -> VoiceBank:
    return VoiceBank.load(installed_voices, VOICES)


#: Voices the streaming tests calibrate (each costs ~10-20 s of CPU once, then is cached on disk).
STREAMING_VOICES = ("af_heart", "am_michael", "bf_emma")


@pytest.fixture(scope="session")
def streaming(speech: Speech) -> StreamingDecoder:
    """The shared engine's verified stage cut, with :data:`STREAMING_VOICES` calibrated."""
    engine = speech.engine
    assert isinstance(engine, OnnxEngine)
    if engine.streaming is None:
        pytest.fail("the stage cut did not verify on the packaged model (see the log)")
    for voice in STREAMING_VOICES:
        engine.streaming.calibration.calibrate(speech.voices.resolve(voice))
    return engine.streaming
