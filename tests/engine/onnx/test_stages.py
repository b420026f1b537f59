"""The stage cut: A→B is the single graph bit for bit, and another export falls back to whole decoding."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from koe.engine.assets import MODEL_SHA256, packaged_model_bytes
from koe.engine.base import AudioChunk, SynthesisRequest, drain
from koe.engine.onnx import stages
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.stages import FRAME_SAMPLES
from koe.engine.vocab import tokenize
from koe.pipeline.speech import Speech

SENTENCE = "When the rain finally stopped, the children ran outside to play in the warm afternoon sun."
#: A fresh engine's: its threads do not spin between operators, since another test worker shares the cores.
OPTIONS = OnnxOptions(threads=2, spin=False)


@pytest.mark.parametrize(("voice", "speed"), [("af_heart", 1.0), ("bm_george", 1.25)])
def test_front_then_vocoder_equals_the_single_graph_bit_for_bit(
    speech: Speech, streaming: StreamingDecoder, voice: str, speed: float
) -> None:
    (phonemes,) = speech.phonemize(SENTENCE)
    style = speech.voices.resolve(voice)
    ids = tokenize(phonemes)
    row = style[len(ids) - 1]
    front = streaming.stages.run_front(ids, row, speed)
    audio, statistics = streaming.stages.decode(front, row)
    whole = speech.engine.synthesize(SynthesisRequest(phonemes, style, speed))
    assert np.array_equal(audio, whole)
    assert front.frames * FRAME_SAMPLES == whole.size and len(front.durations) == len(ids) + 2
    refed = streaming.stages.decode_window(front, row, statistics, 0, front.frames)
    assert np.array_equal(refed, whole)  # the frozen-statistics graph computes the same with them fed in


def test_a_later_start_extracts_no_stage_graph_and_decodes_the_same_bits(
    speech: Speech, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    model = packaged_model_bytes()
    first = OnnxEngine(model, OPTIONS, MODEL_SHA256)  # proves the cut, keeps its graphs

    def extracted(*args: Any) -> None:
        raise AssertionError("a stage graph was extracted again")

    monkeypatch.setattr(stages, "_extract", extracted)
    later = OnnxEngine(model, OPTIONS, MODEL_SHA256)
    assert first.streaming is not None and later.streaming is not None
    (phonemes,) = speech.phonemize("Kept graphs speak alike.")
    request = SynthesisRequest(phonemes, speech.voices.resolve("af_heart"))
    audio = drain(first.stream(request)).audio
    assert audio.size > 0
    assert np.array_equal(drain(later.stream(request)).audio, audio)
    # the session that measures calibrations is cut from the model's bytes when one is needed
    ids = tokenize(phonemes)
    row = request.style[len(ids) - 1]
    sums = [
        cut.class_sums([(cut.run_front(ids, row, 1.0), row)])
        for cut in (first.streaming.stages, later.streaming.stages)
    ]
    assert len(sums[1]) == len(later.streaming.stages.norms) > 0
    for (a, b, c), (x, y, z) in zip(*sums, strict=True):
        assert np.array_equal(a, x) and np.array_equal(b, y) and np.array_equal(c, z)


def _not_kokoro() -> bytes:
    """A real, runnable graph with Kokoro's inputs and output but none of its inner tensors."""
    tokens = helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "n"])
    style = helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, 256])
    speed = helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1])
    audio = helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["samples"])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])
    nodes = [
        helper.make_node("Cast", ["tokens"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["as_float", "flat"], ["samples"]),
        helper.make_node("ReduceMean", ["style"], ["level"], keepdims=0),
        helper.make_node("Mul", ["samples", "speed"], ["scaled"]),
        helper.make_node("Mul", ["scaled", "level"], ["audio"]),
    ]
    graph = helper.make_graph(nodes, "not-kokoro", [tokens, style, speed], [audio], initializer=[flat])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_a_graph_without_the_expected_tensors_falls_back_to_whole_decoding(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="koe.engine.onnx.stages"):
        engine = OnnxEngine(_not_kokoro(), OnnxOptions(threads=1))
    assert engine.streaming is None
    assert not engine.capabilities.windowed and not engine.capabilities.word_timings
    assert "streaming decoder disabled" in caplog.text and "/encoder/Gather_output_0" in caplog.text
    style = np.full((510, 1, 256), 0.5, dtype=np.float32)
    request = SynthesisRequest("hˈɛlO", style)
    events = list(engine.stream(request))
    assert len(events) == 1 and isinstance(events[0], AudioChunk)
    assert np.array_equal(events[0].audio, engine.synthesize(request))
    assert events[0].audio.size == 7  # one sample per token of [pad, h, ˈ, ɛ, l, O, pad]
