"""Per-voice moments of the vocoder's normalized activations, split by quiet and voiced frames.

Windowed decoding must feed every AdaIN block the statistics the whole segment would have had. Those are
time averages, and what moves them most from segment to segment is how much of it is quiet (pauses, the
padding): a per-voice average fits long sentences and misses short ones by up to 30 dB. So calibration
measures, per norm, the first and second moments of its input over quiet and over voiced frames apart —
inside the graph, where the frame mask is resized to each norm's rate and multiplied in, so no activation
tensor leaves ONNX Runtime — and a segment gets the two mixed by its own quiet fraction, which its energy
curve tells right after stage A. Mixing moments (not means and variances) keeps every variance valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

FloatArray = npt.NDArray[np.float32]

#: Frames whose energy (the model's log-scale curve: about −10 in silence, +3…+9 in speech) is below
#: this count as quiet.
QUIET_ENERGY = 0.0
#: The mask's rows, in order.
CLASSES = ("quiet", "voiced")
#: The calibration graph's extra input: ``[1, 2, 2T]``, one row per class, two values per frame.
MASK_INPUT = "koe_class_mask"
_OPSET_DOMAIN = ""


@dataclass(frozen=True, slots=True)
class Norm:
    """One instance norm of the vocoder: its input tensor and where its two statistics sit among the
    vocoder's statistic outputs."""

    activation: str
    mean_index: int
    variance_index: int


def class_mask(energy: FloatArray) -> FloatArray:
    """``[1, 2, len]`` float32: row 0 marks quiet values of the energy curve, row 1 the rest."""
    quiet = (np.asarray(energy, dtype=np.float32).reshape(-1) < QUIET_ENERGY).astype(np.float32)
    return np.stack([quiet, 1 - quiet])[np.newaxis]


def quiet_fraction(energy: FloatArray) -> float:
    """The share of a segment that is quiet: the weight of the quiet moments in its statistics."""
    return float((np.asarray(energy).reshape(-1) < QUIET_ENERGY).mean())


def find_norms(graph: onnx.GraphProto, statistics: Sequence[str]) -> tuple[Norm, ...]:
    """Pair each mean with its variance by the graph's shape of an instance norm:
    ``m = ReduceMean(x)``, ``v = ReduceMean(Mul(Sub(x, m), Sub(x, m)))``. Raises ``ValueError`` when a
    statistic is not part of such a pair."""
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in set(node.input):
            consumers.setdefault(name, []).append(node)
    index = {name: position for position, name in enumerate(statistics)}
    norms = []
    paired: set[str] = set()
    for name in statistics:
        mean_node = producers[name]
        activation = mean_node.input[0]
        variance = _variance_of(activation, name, consumers)
        if variance is None or variance not in index:
            continue
        norms.append(Norm(activation, index[name], index[variance]))
        paired |= {name, variance}
    unpaired = sorted(set(statistics) - paired)
    if unpaired:
        raise ValueError(f"statistics {unpaired[:3]} are not the mean and variance of an instance norm")
    return tuple(norms)


def _variance_of(activation: str, mean: str, consumers: dict[str, list[onnx.NodeProto]]) -> str | None:
    for sub in consumers.get(mean, []):
        if sub.op_type != "Sub" or list(sub.input) != [activation, mean]:
            continue
        for square in consumers.get(sub.output[0], []):
            if square.op_type == "Mul" and list(square.input) == [sub.output[0]] * 2:
                for reduce in consumers.get(square.output[0], []):
                    if reduce.op_type == "ReduceMean":
                        return str(reduce.output[0])
    return None


def moment_outputs(index: int) -> tuple[str, str, str]:
    """Names of norm ``index``'s per-class sums ``[1, C, 2]``, sums of squares ``[1, C, 2]`` and counts
    ``[1, 1, 2]`` in the calibration graph."""
    return (f"koe_moments_{index}_sum", f"koe_moments_{index}_square_sum", f"koe_moments_{index}_count")


def add_class_sums(graph: onnx.GraphProto, norms: Sequence[Norm]) -> None:
    """Give ``graph`` the input :data:`MASK_INPUT` and, per norm, its per-class sums (see
    :func:`moment_outputs`): the mask is resized (nearest, floor) to the norm's length and multiplied in
    with ``MatMul``."""
    graph.input.append(helper.make_tensor_value_info(MASK_INPUT, TensorProto.FLOAT, [1, 2, "mask_length"]))
    constants = {
        "koe_two_rows": np.array([1, 2], dtype=np.int64),
        "koe_axis_2": np.array([2], dtype=np.int64),
    }
    graph.initializer.extend(helper.make_tensor(name, TensorProto.INT64, value.shape, value)
                             for name, value in constants.items())  # fmt: skip
    for position, norm in enumerate(norms):
        prefix = f"koe_moments_{position}"
        total, square_total, count = moment_outputs(position)
        x = norm.activation
        graph.node.extend([
            helper.make_node("Shape", [x], [f"{prefix}_shape"]),
            helper.make_node("Gather", [f"{prefix}_shape", "koe_axis_2"], [f"{prefix}_length"]),
            helper.make_node("Concat", ["koe_two_rows", f"{prefix}_length"], [f"{prefix}_sizes"], axis=0),
            helper.make_node(
                "Resize", [MASK_INPUT, "", "", f"{prefix}_sizes"], [f"{prefix}_mask"],
                mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor",
            ),
            helper.make_node("Transpose", [f"{prefix}_mask"], [f"{prefix}_columns"], perm=[0, 2, 1]),
            helper.make_node("MatMul", [x, f"{prefix}_columns"], [total]),
            helper.make_node("Mul", [x, x], [f"{prefix}_square"]),
            helper.make_node("MatMul", [f"{prefix}_square", f"{prefix}_columns"], [square_total]),
            helper.make_node("ReduceSum", [f"{prefix}_mask", "koe_axis_2"], [count], keepdims=1),
        ])  # fmt: skip
        graph.output.extend([
            helper.make_tensor_value_info(total, TensorProto.FLOAT, None),
            helper.make_tensor_value_info(square_total, TensorProto.FLOAT, None),
            helper.make_tensor_value_info(count, TensorProto.FLOAT, None),
        ])  # fmt: skip


@dataclass(frozen=True, slots=True)
class ClassMoments:
    """One voice's calibration: per norm, ``first[k]`` and ``second[k]`` (each ``[C]``) are the mean of
    the norm's input and of its square over frames of class ``k`` (:data:`CLASSES`)."""

    first: tuple[npt.NDArray[np.float64], ...]
    second: tuple[npt.NDArray[np.float64], ...]

    @classmethod
    def from_sums(
        cls, sums: Sequence[npt.NDArray[np.float64]], squares: Sequence[npt.NDArray[np.float64]],
        counts: Sequence[npt.NDArray[np.float64]],
    ) -> ClassMoments:  # fmt: skip
        """From per-norm totals ``[2, C]``, ``[2, C]`` and counts ``[2]``; raises ``ValueError`` when a class
        was never seen (a calibration set without pauses or without speech)."""
        if any((count <= 0).any() for count in counts):
            raise ValueError("a class of frames is missing from the calibration sentences")
        first = tuple(total / count[:, np.newaxis] for total, count in zip(sums, counts, strict=True))
        second = tuple(total / count[:, np.newaxis] for total, count in zip(squares, counts, strict=True))
        return cls(first, second)

    def statistics(self, norms: Sequence[Norm], quiet: float) -> tuple[FloatArray, ...]:
        """The statistics (``[1, C, 1]`` float32, in the vocoder's order) of a segment whose share
        ``quiet`` of frames is quiet: the class moments mixed by that share."""
        weights = np.array([quiet, 1 - quiet])
        result: list[FloatArray | None] = [None] * (2 * len(norms))
        for norm, first, second in zip(norms, self.first, self.second, strict=True):
            mean = weights @ first
            variance = np.maximum(weights @ second - mean * mean, 0.0)
            result[norm.mean_index] = mean.reshape(1, -1, 1).astype(np.float32)
            result[norm.variance_index] = variance.reshape(1, -1, 1).astype(np.float32)
        assert all(value is not None for value in result)  # find_norms paired every statistic
        return tuple(value for value in result if value is not None)
