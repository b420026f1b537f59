"""KModel weights derived from the int8 ONNX export: each weight is ``scale × (q − zero_point)``.

The export (kokoro-onnx's ``kokoro-v1.0.int8.onnx``, the model ``koe install`` verifies) keeps PyTorch's
module names in most initializers (``encoder.predictor.F0.0.norm1.fc.weight_quantized``) and in every node
name (``/decoder/decoder/generator/ups.0/ConvTranspose``). What the exporter changed is undone here:

* dynamic quantization: int8/uint8 weights with per-tensor or per-column scales; the zero point is the
  one the consuming node names (the quantizer shares equal zero-point tensors between weights);
* weight norm folded into one tensor (``/encoder/F0.0/Mul_output_0``): stored back as ``weight_v = W`` and
  ``weight_g = ‖W‖`` per output channel, which reproduces ``W`` exactly;
* ``MatMul`` weights stored transposed (``[in, out]``), named after graph tensors (``onnx::MatMul_6547``):
  found through the node that consumes them;
* LSTMs (``DynamicQuantizeLSTM``): ``W``/``R`` as ``[directions, in, 4H]`` in ONNX's gate order
  i, o, f, c, and one bias of ``[W_b, R_b]``: transposed and reordered to PyTorch's i, f, g, o.

Two parameter groups have no counterpart in the graph and get the values that make them no-ops, which is
what the graph computes: AdaIN's instance-norm affine (upstream: "affine should be False") and ALBERT's
pooler, whose output Kokoro never reads. Anything else the model needs and the graph lacks is an
``AssetError`` naming it. The result is a lossy copy — the int8 rounding stays — labelled "dequantized
int8" wherever it is used.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import onnx
import torch
from onnx import numpy_helper

from koe.engine.kmodel.checkpoint import no_op_value
from koe.errors import AssetError

logger = logging.getLogger(__name__)

_QUANTIZED = "_quantized"
_SCALE = "_scale"
#: Initializers named after PyTorch parameters start with the export wrapper's two halves.
_WRAPPERS = ("encoder", "decoder")
#: ONNX LSTM gates are i, o, f, c; PyTorch's are i, f, g (= c), o.
_GATES_TO_TORCH = (0, 2, 3, 1)
_LSTM_DIRECTIONS = ("", "_reverse")

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Derived:
    """The state dict (flat, KModel's own keys) and what the derivation had to fill in itself."""

    state: dict[str, torch.Tensor]
    filled: tuple[str, ...]  # keys set to their no-op values (see the module docstring)


def derive_state(model: bytes, template: Mapping[str, torch.Tensor], modules: set[str]) -> Derived:
    """A KModel state dict from the int8 export ``model``.

    Args:
        model: the ONNX bytes.
        template: the target model's state dict (keys, shapes and dtypes to produce).
        modules: the target model's module names (``predictor.F0.0.conv1``...), to place graph-named weights.

    Raises:
        AssetError: the graph cannot be parsed, a weight has no home, or the model needs a parameter the
            graph does not hold (naming up to five).
    """
    try:
        graph = onnx.load_from_string(model).graph
    except Exception as exc:  # onnx raises DecodeError and friends
        raise AssetError(f"the model could not be parsed by onnx: {exc}") from exc
    reader = _Reader(graph, modules)
    values: dict[str, FloatArray] = {}
    for name, value in reader.named_floats():
        values.setdefault(name, value)
    for node in graph.node:
        for key, value in reader.weights_of(node):
            previous = values.setdefault(key, value)
            if previous is not value and not np.array_equal(previous, value):
                raise AssetError(f"two graph tensors claim {key} with different values")
    return _assemble(values, template)


def _assemble(values: dict[str, FloatArray], template: Mapping[str, torch.Tensor]) -> Derived:
    state: dict[str, torch.Tensor] = {}
    filled: list[str] = []
    missing: list[str] = []
    for key, like in template.items():
        value = values.get(key)
        if value is None and key.endswith("weight_v"):
            folded = values.get(key.removesuffix("_v"))
            if folded is not None:
                value = _direction(folded)
        elif value is None and key.endswith("weight_g"):
            folded = values.get(key.removesuffix("_g"))
            if folded is not None:
                value = _channel_norms(folded)
        if value is None:
            fill = no_op_value(key)
            if fill is None:
                missing.append(key)
                continue
            state[key] = torch.full_like(like, fill)
            filled.append(key)
            continue
        if tuple(value.shape) != tuple(like.shape):
            raise AssetError(
                f"{key}: the graph gives shape {list(value.shape)}, the model needs {list(like.shape)}"
            )
        state[key] = torch.from_numpy(np.array(value, dtype=np.float32)).to(like.dtype)
    if missing:
        raise AssetError(
            f"the ONNX graph holds no weights for {len(missing)} model parameters "
            f"({', '.join(missing[:5])}): not the int8 export the derivation was written for"
        )
    return Derived(state, tuple(filled))


def _direction(weight: FloatArray) -> FloatArray:
    """``weight_v`` for a folded ``weight``: the weight itself, except output channels that int8 rounded to
    all zeros, which get ones (with their ``weight_g`` of 0 they stay zero, where 0/0 would be NaN)."""
    dead = ~np.any(weight != 0, axis=tuple(range(1, weight.ndim)))
    if not dead.any():
        return weight
    fixed = weight.copy()
    fixed[dead] = 1.0
    return fixed


def _channel_norms(weight: FloatArray) -> FloatArray:
    """``weight_g`` for ``weight_v = weight``: each output channel's L2 norm (dim 0), as [C, 1, 1]."""
    norms = np.sqrt(
        np.sum(np.square(weight, dtype=np.float64), axis=tuple(range(1, weight.ndim)), keepdims=True)
    )
    result: FloatArray = norms.astype(np.float32)
    return result


class _Reader:
    """The graph's initializers, consumers and scopes, and the weights each weight-bearing node holds."""

    def __init__(self, graph: onnx.GraphProto, modules: set[str]) -> None:
        self._arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
        self._modules = modules
        self._consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self._consumers[name].append(node)

    def named_floats(self) -> list[tuple[str, FloatArray]]:
        """Float initializers named after a parameter (biases, norms, Snake alphas), under KModel's keys."""
        named = []
        for name, array in self._arrays.items():
            if array.dtype == np.float32 and name.split(".", 1)[0] in _WRAPPERS and "." in name:
                named.append((name.split(".", 1)[1], array))
        return named

    def weights_of(self, node: onnx.NodeProto) -> list[tuple[str, FloatArray]]:
        op, inputs = node.op_type, list(node.input)
        if op in ("MatMulInteger", "ConvInteger") and inputs[1] in self._arrays:
            weight = self._dequantize(inputs[1], inputs[3] if len(inputs) > 3 else "")
            return [(self._key(node, inputs[1]), weight.T if op == "MatMulInteger" else weight)]
        if op in ("Conv", "ConvTranspose", "MatMul") and len(inputs) > 1 and inputs[1] in self._arrays:
            weight = self._arrays[inputs[1]].astype(np.float32)
            return [(self._key(node, inputs[1]), weight.T if op == "MatMul" else weight)]
        if op == "Gather" and inputs[0].endswith(_QUANTIZED) and inputs[0] in self._arrays:
            (dequantize,) = (n for n in self._consumers[node.output[0]] if n.op_type == "DequantizeLinear")
            weight = self._dequantize(inputs[0], dequantize.input[2], dequantize.input[1])
            return [(self._key(node, inputs[0]), weight)]
        if op == "DynamicQuantizeLSTM":
            return self._lstm(node)
        return []

    def _lstm(self, node: onnx.NodeProto) -> list[tuple[str, FloatArray]]:
        inputs = list(node.input)
        # X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point
        w = self._dequantize(inputs[1], inputs[9], inputs[8], per_direction=True)
        r = self._dequantize(inputs[2], inputs[11], inputs[10], per_direction=True)
        bias = self._arrays[inputs[3]].astype(np.float32)
        module = self._module(node)
        hidden = r.shape[1]
        pairs: list[tuple[str, FloatArray]] = []
        for direction, suffix in enumerate(_LSTM_DIRECTIONS):
            pairs += [
                (f"{module}.weight_ih_l0{suffix}", _torch_gates(w[direction].T, hidden)),
                (f"{module}.weight_hh_l0{suffix}", _torch_gates(r[direction].T, hidden)),
                (f"{module}.bias_ih_l0{suffix}", _torch_gates(bias[direction, : 4 * hidden], hidden)),
                (f"{module}.bias_hh_l0{suffix}", _torch_gates(bias[direction, 4 * hidden :], hidden)),
            ]
        return pairs

    def _dequantize(
        self, name: str, zero_point: str, scale: str | None = None, *, per_direction: bool = False
    ) -> FloatArray:
        scale = scale or name.removesuffix(_QUANTIZED) + _SCALE
        if scale not in self._arrays:
            raise AssetError(f"quantized weight {name} has no scale {scale} in the graph")
        q = self._arrays[name].astype(np.int32)
        zp = self._arrays[zero_point].astype(np.int32) if zero_point else np.zeros((), np.int32)
        s = self._arrays[scale].astype(np.float32)
        if per_direction:  # one scale and zero point per direction, on axis 0
            zp, s = zp.reshape(-1, 1, 1), s.reshape(-1, 1, 1)
        return ((q - zp) * s).astype(np.float32)

    def _key(self, node: onnx.NodeProto, weight: str) -> str:
        """KModel's key for ``weight``: its own name when it carries one, else ``<module>.weight``."""
        prefix = weight.split(".", 1)[0]
        if prefix in _WRAPPERS and "." in weight:
            return weight.removesuffix(_QUANTIZED).split(".", 1)[1]
        return f"{self._module(node, weight)}.weight"

    def _module(self, node: onnx.NodeProto, weight: str | None = None) -> str:
        """The module a node belongs to, from its scope; a weight shared by several nodes (ALBERT repeats
        its one layer) is placed by whichever of its consumers' scopes names a module."""
        nodes = self._consumers[weight] if weight is not None else [node]
        found = {module for module in (_resolve(n.name, self._modules) for n in nodes) if module is not None}
        if len(found) != 1:
            raise AssetError(
                f"graph node {node.name} ({node.op_type}) maps to {sorted(found) or 'no'} model module(s)"
            )
        return found.pop()


def _torch_gates(weight: FloatArray, hidden: int) -> FloatArray:
    """Rows (or entries) in ONNX's gate order i, o, f, c → PyTorch's i, f, g, o."""
    chunks = [weight[gate * hidden : (gate + 1) * hidden] for gate in range(4)]
    return np.concatenate([chunks[gate] for gate in _GATES_TO_TORCH], axis=0)


def _resolve(node_name: str, modules: set[str]) -> str | None:
    """The one module whose dotted name ends with the scope's last part and contains its other parts, e.g.
    ``/encoder/F0.0/conv1/Conv_quant`` → ``predictor.F0.0.conv1``; ``None`` when none or several do."""
    parts = node_name.strip("/").split("/")[:-1]
    if len(parts) < 2 or parts[0] not in _WRAPPERS:
        return None
    last, inner = parts[-1], parts[1:-1]
    matches = [
        module
        for module in modules
        if (module == last or module.endswith("." + last)) and all(_contains(module, part) for part in inner)
    ]
    return matches[0] if len(matches) == 1 else None


def _contains(module: str, part: str) -> bool:
    segments, wanted = module.split("."), part.split(".")
    return any(segments[i : i + len(wanted)] == wanted for i in range(len(segments) - len(wanted) + 1))
