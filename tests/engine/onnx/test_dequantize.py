"""The vocoder's convolutions dequantized: every generator ``ConvInteger`` gone, the graph's outputs kept,
the rewritten model kept in the cache under its own identity, the audio within the quality gates of the int8
graph's, and a setting that runs the int8 graph as exported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from koe.engine.assets import MODEL_SHA256, packaged_model_bytes
from koe.engine.onnx import dequantize
from koe.engine.onnx.dequantize import GENERATOR_PREFIX, dequantize_vocoder, dequantized, identity
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.sessions import OptimizedSessions
from koe.engine.onnx.stages import PROBE_PHONEMES
from koe.engine.quality import compare
from koe.engine.vocab import tokenize
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings

#: The model's take-to-take variation: the float convolutions' audio must stay within it of the int8 graph's
#: (the streaming quality gate's bound, tests/engine/onnx/test_streaming_quality.py).
TAKE_TO_TAKE_DB = 3.0
#: Convolutions of the generator in the packaged export, all quantized.
GENERATOR_CONVOLUTIONS = 50


def _ops(proto: onnx.ModelProto, op_type: str, prefix: str = "") -> int:
    return sum(node.op_type == op_type and node.name.startswith(prefix) for node in proto.graph.node)


@pytest.fixture(scope="module")
def int8() -> onnx.ModelProto:
    return onnx.load_from_string(packaged_model_bytes())


def test_the_rewrite_removes_every_convinteger_of_the_generator_and_keeps_the_outputs(
    int8: onnx.ModelProto,
) -> None:
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(int8)
    assert dequantize_vocoder(rewritten) == GENERATOR_CONVOLUTIONS
    assert _ops(rewritten, "ConvInteger", GENERATOR_PREFIX) == 0
    assert (
        _ops(rewritten, "Conv", GENERATOR_PREFIX)
        == _ops(int8, "Conv", GENERATOR_PREFIX) + GENERATOR_CONVOLUTIONS
    )
    outside = _ops(int8, "ConvInteger") - GENERATOR_CONVOLUTIONS
    assert _ops(rewritten, "ConvInteger") == outside > 0  # the rest of the model stays int8
    assert _ops(rewritten, "DynamicQuantizeLinear", GENERATOR_PREFIX) < _ops(
        int8, "DynamicQuantizeLinear", GENERATOR_PREFIX
    )  # the quantizations only the convolutions read are gone
    assert [value.name for value in rewritten.graph.output] == [value.name for value in int8.graph.output]
    assert [value.name for value in rewritten.graph.input] == [value.name for value in int8.graph.input]
    onnx.checker.check_model(rewritten)


def test_a_chain_that_is_not_the_exports_is_refused_unchanged(int8: onnx.ModelProto) -> None:
    altered = onnx.ModelProto()
    altered.CopyFrom(int8)
    conv = next(
        n for n in altered.graph.node if n.op_type == "ConvInteger" and n.name.startswith(GENERATOR_PREFIX)
    )
    conv.input[0] = altered.graph.input[0].name  # no longer fed by a DynamicQuantizeLinear
    nodes = len(altered.graph.node)
    with pytest.raises(ValueError, match="DynamicQuantizeLinear"):
        dequantize_vocoder(altered)
    assert len(altered.graph.node) == nodes


def test_the_rewritten_model_is_kept_and_read_back_under_its_own_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged_model_bytes()
    first = dequantized(model, MODEL_SHA256, tmp_path)
    assert first is not None
    assert first.identity == identity(MODEL_SHA256) != MODEL_SHA256
    assert (tmp_path / f"{first.identity}.onnx").read_bytes() == first.model

    def rewrite_again(proto: onnx.ModelProto) -> int:
        raise AssertionError("a kept model must be read, not rewritten")

    monkeypatch.setattr(dequantize, "dequantize_vocoder", rewrite_again)
    again = dequantized(model, MODEL_SHA256, tmp_path)
    assert again is not None and again.model == first.model and again.identity == first.identity


def test_a_damaged_kept_model_is_rewritten(tmp_path: Path) -> None:
    (tmp_path / f"{identity(MODEL_SHA256)}.onnx").write_bytes(b"not a model")
    rewritten = dequantized(packaged_model_bytes(), MODEL_SHA256, tmp_path)
    assert rewritten is not None
    assert _ops(rewritten.proto, "ConvInteger", GENERATOR_PREFIX) == 0
    assert (tmp_path / f"{rewritten.identity}.onnx").read_bytes() == rewritten.model


def test_a_model_without_quantized_convolutions_runs_as_it_is(int8: onnx.ModelProto, tmp_path: Path) -> None:
    done = onnx.ModelProto()
    done.CopyFrom(int8)
    dequantize_vocoder(done)
    assert dequantized(done.SerializeToString(), "ab" * 32, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_the_setting_is_on_by_default_and_turned_off_by_its_variable() -> None:
    assert Settings.from_env({}).float_vocoder
    assert not Settings.from_env({"KOE_FLOAT_VOCODER": "false"}).float_vocoder
    off = SpeechOptions.from_settings(Settings.from_env({"KOE_FLOAT_VOCODER": "false"}))
    assert not off.engine.float_vocoder  # what the server loads its engine with


@pytest.mark.model
def test_turned_off_the_engine_runs_the_int8_graph_and_on_it_sounds_within_the_gates(speech: Speech) -> None:
    floats = speech.engine
    assert isinstance(floats, OnnxEngine) and floats.float_vocoder
    assert floats.model_sha256 == identity(MODEL_SHA256)  # every cached artefact is keyed on the rewrite
    assert "float vocoder convolutions" in floats.description
    int8 = OnnxEngine(packaged_model_bytes(), OnnxOptions(threads=2, float_vocoder=False), MODEL_SHA256)
    assert not int8.float_vocoder and int8.model_sha256 == MODEL_SHA256
    assert "(int8)" in int8.description
    style = speech.voices.resolve("af_heart")
    ids = tokenize(PROBE_PHONEMES)
    row = style[len(ids) - 1]
    whole_int8 = int8._decode(ids, row, 1.0)
    exported = OptimizedSessions(2, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ["CPUExecutionProvider"])
    feeds = {
        "tokens": np.array([[0, *ids, 0]], dtype=np.int64),
        "style": row,
        "speed": np.ones(1, np.float32),
    }
    assert np.array_equal(whole_int8, exported(packaged_model_bytes()).run(None, feeds)[0].reshape(-1))
    whole_float = floats._decode(ids, row, 1.0)
    assert whole_float.size == whole_int8.size
    assert not np.array_equal(whole_float, whole_int8)  # the setting changes what runs
    difference = compare(whole_float, whole_int8)
    assert difference.distance_db < TAKE_TO_TAKE_DB, difference
    assert abs(difference.level_db) < TAKE_TO_TAKE_DB, difference
    assert difference.balance_db < TAKE_TO_TAKE_DB, difference
