"""Class moments: the mixture equals pooling, norms pair by graph shape, the in-graph sums equal numpy's."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from koe.engine.onnx.moments import (
    MASK_INPUT,
    ClassMoments,
    Norm,
    add_class_sums,
    class_mask,
    find_norms,
    moment_outputs,
    quiet_fraction,
)


def test_class_mask_marks_quiet_energy_and_the_rest() -> None:
    energy = np.array([[-9.5, 4.0, -0.1, 0.0, 7.2, -10.0]], dtype=np.float32)
    mask = class_mask(energy)
    assert mask.shape == (1, 2, 6) and mask.dtype == np.float32
    assert mask[0, 0].tolist() == [1, 0, 1, 0, 0, 1]
    assert (mask[0, 0] + mask[0, 1] == 1).all()
    assert quiet_fraction(energy) == pytest.approx(0.5)


@settings(max_examples=50, deadline=None)
@given(
    quiet_frames=st.integers(1, 40),
    voiced_frames=st.integers(1, 40),
    seed=st.integers(0, 2**16),
)
def test_mixing_class_moments_by_the_quiet_share_gives_the_pooled_mean_and_variance(
    quiet_frames: int, voiced_frames: int, seed: int
) -> None:
    """Exact when each class looks as it did in calibration: the estimate errs only where content does."""
    rng = np.random.default_rng(seed)
    quiet = rng.normal(-1.0, 0.3, (3, quiet_frames))
    voiced = rng.normal(2.0, 1.5, (3, voiced_frames))
    sums = [np.stack([quiet.sum(1), voiced.sum(1)])]
    squares = [np.stack([(quiet**2).sum(1), (voiced**2).sum(1)])]
    counts = [np.array([quiet_frames, voiced_frames], dtype=np.float64)]
    moments = ClassMoments.from_sums(sums, squares, counts)
    pooled = np.concatenate([quiet, voiced], axis=1)
    share = quiet_frames / (quiet_frames + voiced_frames)
    variance, mean = moments.statistics([Norm("x", 1, 0)], share)  # order follows the indices
    assert mean.shape == variance.shape == (1, 3, 1)
    np.testing.assert_allclose(mean.reshape(-1), pooled.mean(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(variance.reshape(-1), pooled.var(1), rtol=1e-4, atol=1e-5)


def test_a_calibration_that_never_saw_a_class_is_refused() -> None:
    with pytest.raises(ValueError, match="class of frames is missing"):
        ClassMoments.from_sums([np.ones((2, 3))], [np.ones((2, 3))], [np.array([5.0, 0.0])])


def _instance_norm_graph(extra_statistic: bool = False) -> onnx.ModelProto:
    """``y = (x - mean) / sqrt(var + eps)`` over time, as the Kokoro export spells it."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    eps = helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["centred"]),
        helper.make_node("Mul", ["centred", "centred"], ["square"]),
        helper.make_node("ReduceMean", ["square", "axes"], ["variance"], keepdims=1),
        helper.make_node("Add", ["variance", "eps"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["deviation"]),
        helper.make_node("Div", ["centred", "deviation"], ["y"]),
    ]
    if extra_statistic:  # a ReduceMean that normalizes nothing
        nodes.append(helper.make_node("ReduceMean", ["y", "axes"], ["stray"], keepdims=1))
    graph = helper.make_graph(
        nodes,
        "norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "length"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "length"])],
        initializer=[axes, eps],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_norms_pair_each_mean_with_its_variance_and_refuse_strays() -> None:
    model = _instance_norm_graph()
    assert find_norms(model.graph, ["variance", "mean"]) == (Norm("x", 1, 0),)
    with pytest.raises(ValueError, match="stray"):
        find_norms(_instance_norm_graph(extra_statistic=True).graph, ["mean", "variance", "stray"])


@pytest.mark.parametrize("length", [4, 8, 40])
def test_in_graph_class_sums_equal_numpy_at_any_rate_of_the_mask(length: int) -> None:
    """The mask has 8 values; the norm runs at half, the same or five times that rate."""
    model = _instance_norm_graph()
    (norm,) = find_norms(model.graph, ["mean", "variance"])
    add_class_sums(model.graph, [norm])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(length)
    x = rng.normal(size=(1, 3, length)).astype(np.float32)
    energy = np.array([-5, -5, 3, 4, -1, 6, 6, 2], dtype=np.float32)
    mask = class_mask(energy)
    total, square_total, count = session.run(list(moment_outputs(0)), {"x": x, MASK_INPUT: mask})
    quiet = (energy < 0)[np.arange(length) * energy.size // length]  # nearest, rounding down
    values, squares = x[0], x[0] ** 2
    for measured, of in ((total, values), (square_total, squares)):
        np.testing.assert_allclose(measured[0].T, [of[:, quiet].sum(1), of[:, ~quiet].sum(1)], rtol=1e-5)
    assert count.reshape(-1).tolist() == [quiet.sum(), (~quiet).sum()]
