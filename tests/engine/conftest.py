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


#: Untrained, the duration head predicts ~25 frames per token (1 s of audio per phoneme): too slow on CPU.
#: Scaled and shifted, it predicts 2-4 frames that still differ between tokens, styles and speeds.
_DURATION_WEIGHT_SCALE, _DURATION_BIAS = 6.0, -4.5


@pytest.fixture(scope="session")
def random_kmodel() -> object:
    """KModel's architecture with random weights (seeded) and a duration head scaled to 2-4 frames a token,
    for the torch engine's tests that need no trained weights."""
    torch = pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
    pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")
    from koe.engine.kmodel.checkpoint import build_model

    torch.manual_seed(0)
    built = build_model()
    head = built.predictor.duration_proj.linear_layer
    with torch.no_grad():
        head.weight.mul_(_DURATION_WEIGHT_SCALE)
        head.bias.fill_(_DURATION_BIAS)
    return built
