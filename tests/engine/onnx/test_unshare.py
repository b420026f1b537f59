"""Each resblock normalizes its input itself: the export's shared normalized tensor is copied for every later
reader, the copies survive ONNX Runtime's optimizations (kept on disk or not), and the audio is the same to
the bit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from koe.engine.assets import packaged_model_bytes
from koe.engine.onnx.dequantize import GENERATOR_PREFIX, dequantize_vocoder
from koe.engine.onnx.sessions import OptimizedSessions
from koe.engine.onnx.unshare import unshare_norms

_ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
_CPU = ["CPUExecutionProvider"]
#: The generator's two stages each start three resblocks on one normalized input: two later readers each.
_EXPORT_COPIES = 4


def _shared_norm() -> onnx.ModelProto:
    """``y = a * norm(x) + b * norm(x)``, the instance norm computed once and read twice, as Kokoro's export
    writes the first norm of its parallel resblocks."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], name="mean", axes=[2]),
        helper.make_node("Sub", ["x", "mean"], ["centred"]),
        helper.make_node("Mul", ["centred", "centred"], ["square"]),
        helper.make_node("ReduceMean", ["square"], ["variance"], axes=[2]),
        helper.make_node("Add", ["variance", "epsilon"], ["padded"]),
        helper.make_node("Sqrt", ["padded"], ["std"]),
        helper.make_node("Div", ["centred", "std"], ["normalized"]),
        helper.make_node("Mul", ["normalized", "a"], ["first"]),
        helper.make_node("Mul", ["normalized", "b"], ["second"]),
        helper.make_node("Add", ["first", "second"], ["y"]),
    ]
    constants = [
        helper.make_tensor("epsilon", TensorProto.FLOAT, [], [1e-5]),
        helper.make_tensor("a", TensorProto.FLOAT, [1, 3, 1], [0.5, -1.0, 2.0]),
        helper.make_tensor("b", TensorProto.FLOAT, [1, 3, 1], [1.5, 0.25, -0.75]),
    ]
    graph = helper.make_graph(
        nodes, "shared norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, None])], constants,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _of(graph: onnx.GraphProto, op_type: str) -> list[onnx.NodeProto]:
    return [node for node in graph.node if node.op_type == op_type]


def _readers(graph: onnx.GraphProto, op_type: str) -> list[int]:
    """How many nodes read the output of each of the graph's ``op_type`` nodes."""
    read = Counter(name for node in graph.node for name in set(node.input))
    return [read[node.output[0]] for node in _of(graph, op_type)]


def test_every_later_reader_gets_its_own_normalization_and_the_rest_is_left_alone() -> None:
    model = _shared_norm()
    assert _readers(model.graph, "Div") == [2]
    assert unshare_norms(model.graph) == 1
    assert _readers(model.graph, "Div") == [1, 1]
    assert Counter(node.op_type for node in model.graph.node)["ReduceMean"] == 2  # the statistics stay shared
    onnx.checker.check_model(model)
    assert unshare_norms(model.graph) == 0  # nothing shared is left


def test_the_copies_survive_optimization_kept_on_disk_or_not_and_compute_the_same_values(
    tmp_path: Path,
) -> None:
    """ONNX Runtime's common-subexpression elimination would merge the copies back into one tensor alive
    across the resblocks: sessions run without it (sessions.DISABLED_OPTIMIZERS)."""
    shared = _shared_norm()
    unshared = _shared_norm()
    unshare_norms(unshared.graph)
    x = np.random.default_rng(0).standard_normal((1, 3, 50)).astype(np.float32)
    expected = ort.InferenceSession(shared.SerializeToString(), providers=_CPU).run(None, {"x": x})[0]
    make = OptimizedSessions(1, _ALL, _CPU, tmp_path)
    for session in (make(unshared.SerializeToString()), make(unshared.SerializeToString())):
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)
    (kept,) = tmp_path.glob("*.onnx")
    assert _readers(onnx.load(kept).graph, "Div") == [1, 1]


@pytest.mark.model
def test_kokoros_resblocks_each_normalize_their_input_and_decode_the_same_bits() -> None:
    model = onnx.load_from_string(packaged_model_bytes())
    dequantize_vocoder(model)
    before = model.SerializeToString()
    assert unshare_norms(model.graph) == _EXPORT_COPIES
    first_norms = [
        count
        for node, count in zip(_of(model.graph, "Div"), _readers(model.graph, "Div"), strict=True)
        if node.name.startswith(f"{GENERATOR_PREFIX}resblocks.") and "/adain1.0/" in node.name
    ]
    assert first_norms == [1] * 6  # one normalized input for each of the six resblocks, read by it alone
    tokens = np.random.default_rng(7).integers(1, 150, 30)
    feeds = {
        "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
        "style": (np.random.default_rng(8).standard_normal((1, 256)) * 0.2).astype(np.float32),
        "speed": np.array([1.0], dtype=np.float32),
    }
    make = OptimizedSessions(2, _ALL, _CPU)
    audio = make(model.SerializeToString()).run(None, feeds)[0]
    assert audio.size > 0
    np.testing.assert_array_equal(audio, make(before).run(None, feeds)[0])
