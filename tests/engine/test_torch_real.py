"""The PyTorch engine with the weights derived from the int8 model, on CPU: the same model as the ONNX
engine, stage by stage and to the ear, alone or in a batch; spoken by ``koe say`` with ``KOE_ENGINE=torch``.

Tolerances are ``koe.conversion.parity.TOLERANCES`` (docs/engine.md, "PyTorch engine", gives the
measured values). One short sentence per check: each costs seconds of CPU.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from koe.engine.assets import packaged_model_bytes
from koe.engine.quality import compare
from koe.engine.timing import SegmentTiming
from koe.errors import AssetError, ConfigError
from koe.pipeline.speech import Speech
from support import Transcriber, word_error_rate
from support.batching import assert_batch_members_sound_as_alone, request

pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")

from koe.conversion.parity import TOLERANCES, compare_stages, exceeded
from koe.conversion.taps import Taps
from koe.engine.kmodel.checkpoint import DEQUANTIZED

#: Not used to tune anything: read back by ASR from both engines.
HELD_OUT = (
    "The train to Boston leaves at nine fifteen from platform four.",
    "Could you send the report to the whole team by Thursday?",
)
#: Batched against alone: a batch of other lengths, voices and speeds must not change a member.
BATCH_TEXTS = (("Hold on.", "af_heart", 1.0), ("It rained all day long.", "bf_emma", 1.1))


def test_the_engine_says_which_weights_it_runs(torch_speech: Speech) -> None:
    assert torch_speech.engine.weights == DEQUANTIZED  # type: ignore[attr-defined]
    assert torch_speech.engine.description == f"torch on cpu ({DEQUANTIZED} weights)"


def test_derived_weights_match_the_int8_graph_stage_by_stage(torch_speech: Speech) -> None:
    one = request(torch_speech, "Please call Stella and ask her to bring these things.", "af_heart")
    errors = compare_stages(torch_speech.engine._model, Taps(packaged_model_bytes(), threads=2), one)  # type: ignore[attr-defined]
    assert exceeded(errors) == [], errors
    assert errors.aligned_text > 0  # the two are compared, not the same tensors twice


def test_bfloat16_speaks_within_the_parity_gates_of_float32(torch_speech: Speech) -> None:
    """The CPU's half format (``KOE_TORCH_DTYPE=bfloat16``): its stages against the int8 graph within the
    float32 engine's tolerances, and its audio as far from float32's as the audio gate allows, durations
    identical."""
    from koe.conversion.install import install
    from koe.engine.torch import TorchEngine, TorchOptions

    options = TorchOptions(device="cpu", max_batch=1, threads=2, dtype="bfloat16")
    engine = TorchEngine.load(install("derived"), options)
    one = request(torch_speech, "Please call Stella and ask her to bring these things.", "af_heart")
    errors = compare_stages(engine._model, Taps(packaged_model_bytes(), threads=2), one)
    assert exceeded(errors) == [], errors
    (half,), (full,) = engine.synthesize_batch([one]), torch_speech.engine.synthesize_batch([one])
    assert half.timing is not None and full.timing is not None
    assert np.array_equal(half.timing.durations, full.timing.durations)
    difference = compare(half.audio, full.audio)
    assert difference.distance_db < TOLERANCES.audio_distance_db, difference
    assert abs(difference.level_db) < TOLERANCES.audio_level_db, difference


def test_a_segment_sounds_the_same_alone_and_in_a_batch(torch_speech: Speech) -> None:
    requests = [request(torch_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    assert_batch_members_sound_as_alone(torch_speech.engine, requests)


def test_held_out_sentences_read_back_as_well_as_from_the_onnx_engine(
    speech: Speech, torch_speech: Speech, transcribe: Transcriber
) -> None:
    errors: dict[str, list[float]] = {"onnx": [], "torch": []}
    for text in HELD_OUT:
        errors["onnx"].append(word_error_rate(text, transcribe(speech.synthesize(text))))
        errors["torch"].append(word_error_rate(text, transcribe(torch_speech.synthesize(text))))
    assert np.mean(errors["torch"]) <= np.mean(errors["onnx"]), errors


def test_a_stream_times_its_words_before_its_audio(torch_speech: Speech) -> None:
    stream = torch_speech.engine.stream(request(torch_speech, "Good morning.", "af_heart"))
    timing, chunk = next(stream), next(stream)
    assert isinstance(timing, SegmentTiming)
    assert timing.samples == chunk.audio.size  # type: ignore[union-attr]
    assert stream.done


@pytest.mark.slow
def test_koe_say_speaks_with_the_torch_engine(
    torch_speech: Speech, transcribe: Transcriber, tmp_path: Path
) -> None:
    """``KOE_ENGINE=torch koe say`` in its own process, with the derived weights ``torch_speech`` cached."""
    text = "Turn left at the next corner."
    env = {**os.environ, "KOE_ENGINE": "torch", "KOE_DEVICE": "cpu", "KOE_THREADS_PER_WORKER": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "koe.cli", "say", text, "-f", "wav"],
        env=env, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    audio, rate = soundfile.read(io.BytesIO(done.stdout), dtype="float32")
    assert rate == 24_000 and audio.size > rate
    assert word_error_rate(text, transcribe(audio)) == 0


def test_install_derives_when_the_official_weights_cannot_be_fetched(
    torch_speech: Speech, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``koe install --engine torch`` offline: the official download fails, the cached derivation is kept."""
    from koe.conversion import install as installing

    def offline(target: Path | None = None) -> object:
        raise OSError("Name or service not known")

    monkeypatch.setattr(installing, "download_official", offline)
    assert installing.install("auto").kind == DEQUANTIZED
    with pytest.raises(AssetError, match="official weights could not be downloaded: Name or service"):
        installing.install("official")


def test_a_wrong_official_download_is_an_error_not_a_reason_to_derive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from koe.conversion import install as installing

    def corrupt(target: Path | None = None) -> object:
        raise AssetError("kokoro-v1_0.pth: sha256 abc does not match the pinned 496d…")

    monkeypatch.setattr(installing, "download_official", corrupt)
    with pytest.raises(AssetError, match="does not match the pinned"):
        installing.install("auto")
    with pytest.raises(ConfigError, match="weights must be one of auto, official, derived"):
        installing.install("newest")
