"""Dequantize the vocoder's convolutions: Kokoro's int8 export rewritten to run its generator's convolutions
in float.

The export quantizes every convolution dynamically: each runs as ``DynamicQuantizeLinear → ConvInteger →
Add (the rounded bias) → Cast → Mul (input scale × weight scale)``. In the generator (stage B, most of a
decode's CPU) those chains are most of the kernel time, and ONNX Runtime's float ``Conv`` on the same
weights, dequantized once here, runs them in less CPU than the integer kernels plus the activations'
quantization (docs/engine.md, "Float convolutions"). The audio differs from the int8 graph's, within the
quality gates: the activations are no longer rounded to 8 bits and the bias no longer to the input's
scale. The text encoder, the prosody predictor and the frame-rate decoder keep their int8 kernels: they
are a few percent of a decode, and their ``MatMulInteger`` weights stay small in memory. The same rewrite
gives each resblock its own normalized input (:mod:`koe.engine.onnx.unshare`): the same bits, a ninth less
memory at a decode's peak.

The rewrite is deterministic in the model's bytes, so a model's rewritten bytes are kept in koe's cache
(``<cache>/dequantized/<identity>.onnx``) and later loads read them instead of rewriting (parsing,
rewriting and serializing the model costs ~0.4 s). Its identity (:func:`identity`) names the
original model and :data:`REWRITE_VERSION`, and stands for the model wherever the engine keys a derived
artefact (the stage cut's verdict, the kept stage graphs, calibrations), so that an artefact of the int8
graph is never used for the rewritten one, nor the other way round.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper

from koe.engine.onnx.unshare import unshare_norms
from koe.machine import partial_of, prune_to_used_last

logger = logging.getLogger(__name__)

#: Bump when the rewrite's output changes: rewritten models kept under the old identity are then not used.
REWRITE_VERSION = 2
#: The graph's prefix of the generator's nodes, the convolutions rewritten.
GENERATOR_PREFIX = "/decoder/decoder/generator/"
_KEPT_MODELS = 2  # one model's rewrite is ~130 MB: the last two used (an upgrade and its predecessor)

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class _Chain:
    """One quantized convolution: its nodes, what the float ``Conv`` takes and what it replaces."""

    conv: onnx.NodeProto  # the ConvInteger
    source: str  # the float input of its DynamicQuantizeLinear
    output: str  # the Mul's output: the convolution's float result
    weight: FloatArray
    bias: FloatArray | None


def identity(model_sha256: str) -> str:
    """What names the rewritten model of the one whose sha256 is ``model_sha256`` (a sha256 too)."""
    return hashlib.sha256(f"{model_sha256} dequantized vocoder {REWRITE_VERSION}".encode()).hexdigest()


def dequantize_vocoder(proto: onnx.ModelProto) -> int:
    """Rewrite, in place, each of the generator's quantized convolution chains into one float ``Conv`` on
    the dequantized weights, computing the same tensor; returns how many. Nodes and initializers nothing
    reads any more are removed. Raises ``ValueError`` when a generator ``ConvInteger`` is not the chain the
    export writes (another quantizer): nothing is changed then."""
    graph = proto.graph
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            readers[name].append(node)
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    chains = [
        _chain(node, producer, readers, initializers)
        for node in graph.node
        if node.op_type == "ConvInteger" and node.name.startswith(GENERATOR_PREFIX)
    ]
    replaced = {chain.output: chain for chain in chains}
    nodes = []
    added: list[onnx.TensorProto] = []
    for node in graph.node:
        chain = replaced.get(node.output[0]) if node.op_type == "Mul" else None
        if chain is None:
            nodes.append(node)
            continue
        weight = f"{chain.conv.name}/float_weight"
        inputs = [chain.source, weight]
        added.append(numpy_helper.from_array(chain.weight, weight))
        if chain.bias is not None:
            inputs.append(f"{chain.conv.name}/float_bias")
            added.append(numpy_helper.from_array(chain.bias, inputs[-1]))
        conv = onnx.helper.make_node("Conv", inputs, [chain.output], name=f"{chain.conv.name}/float")
        conv.attribute.extend(chain.conv.attribute)
        nodes.append(conv)
    del graph.node[:]
    graph.node.extend(_live(nodes, {output.name for output in graph.output}))
    read = {name for node in graph.node for name in node.input}
    kept = [tensor for tensor in [*graph.initializer, *added] if tensor.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return len(chains)


def _chain(
    conv: onnx.NodeProto,
    producer: dict[str, onnx.NodeProto],
    readers: dict[str, list[onnx.NodeProto]],
    initializers: dict[str, onnx.TensorProto],
) -> _Chain:
    """The chain around ``conv`` with its weights dequantized; ``ValueError`` if it is not the export's."""

    def only_reader(name: str, op_type: str) -> onnx.NodeProto:
        found = readers.get(name, [])
        if len(found) != 1 or found[0].op_type != op_type:
            got = [node.op_type for node in found]
            raise ValueError(f"{conv.name}: expected {name} read by one {op_type}, got {got}")
        return found[0]

    def constant(name: str) -> npt.NDArray[np.generic]:
        if name not in initializers:
            raise ValueError(f"{conv.name}: expected {name} to be an initializer, got a computed tensor")
        return numpy_helper.to_array(initializers[name])

    quantize = producer.get(conv.input[0])
    if quantize is None or quantize.op_type != "DynamicQuantizeLinear":
        got = None if quantize is None else quantize.op_type
        raise ValueError(f"{conv.name}: expected its input quantized by DynamicQuantizeLinear, got {got}")
    bias_add = only_reader(conv.output[0], "Add")
    cast = only_reader(bias_add.output[0], "Cast")
    rescale = only_reader(cast.output[0], "Mul")
    scale = producer.get(rescale.input[1])
    if scale is None or scale.op_type != "Mul" or scale.input[0] != quantize.output[1]:
        raise ValueError(f"{conv.name}: expected the output scaled by input scale × weight scale")
    quantized = constant(conv.input[1]).astype(np.float32)
    zero_point = constant(conv.input[3]) if len(conv.input) > 3 and conv.input[3] else np.zeros(1)
    scales = constant(scale.input[1])
    weight = (quantized - _by_channel(zero_point, quantized)) * _by_channel(scales, quantized)
    return _Chain(
        conv,
        quantize.input[0],
        rescale.output[0],
        weight.astype(np.float32),
        _bias(conv, bias_add, producer, initializers),
    )


def _by_channel(values: npt.NDArray[np.generic], weight: FloatArray) -> FloatArray:
    """A per-tensor (one value) or per-output-channel quantization parameter, shaped to broadcast over
    ``weight`` (``[out, in, kernel]``)."""
    shape = (-1,) + (1,) * (weight.ndim - 1) if values.size > 1 else ()
    shaped: FloatArray = values.astype(np.float32).reshape(shape)
    return shaped


def _bias(
    conv: onnx.NodeProto,
    bias_add: onnx.NodeProto,
    producer: dict[str, onnx.NodeProto],
    initializers: dict[str, onnx.TensorProto],
) -> FloatArray | None:
    """The float bias the export quantized at run time (``Div(bias, scale) → Floor → Cast → Reshape``)."""
    node = producer.get(bias_add.input[1])
    for op_type in ("Reshape", "Cast", "Floor", "Div"):
        if node is None or node.op_type != op_type:
            got = None if node is None else node.op_type
            raise ValueError(f"{conv.name}: expected its bias through {op_type}, got {got}")
        if op_type == "Div":
            break
        node = producer.get(node.input[0])
    assert node is not None  # the loop breaks at the Div or raises
    if node.input[0] not in initializers:
        raise ValueError(f"{conv.name}: expected a constant bias, got a computed {node.input[0]}")
    bias: FloatArray = numpy_helper.to_array(initializers[node.input[0]]).astype(np.float32)
    return bias


def _live(nodes: list[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """``nodes`` (in order) that an output depends on."""
    needed = set(outputs)
    live = []
    for node in reversed(nodes):
        if any(output in needed for output in node.output):
            live.append(node)
            needed.update(name for name in node.input if name)
    live.reverse()
    return live


@dataclass(frozen=True, slots=True)
class Dequantized:
    """A model with its vocoder's convolutions dequantized: its bytes, its graph, its :func:`identity`."""

    model: bytes
    proto: onnx.ModelProto
    identity: str


def dequantized(model: bytes, model_sha256: str, directory: Path) -> Dequantized | None:
    """``model`` (whose sha256 is ``model_sha256``) rewritten by :func:`dequantize_vocoder` (and its norms
    by :func:`~koe.engine.onnx.unshare.unshare_norms`): read from
    ``directory`` when an earlier load kept it, else rewritten now and kept there (a cache that cannot be
    written costs the rewrite at each load, nothing more). ``None`` (logged) when there is nothing to
    rewrite (a float export) or the graph is not the export the rewrite knows: the engine runs ``model``."""
    named = identity(model_sha256)
    path = directory / f"{named}.onnx"
    try:
        kept = path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("ignoring the dequantized model %s: %s", path, exc)
    else:
        try:
            proto = onnx.load_from_string(kept)
        except Exception as exc:  # a damaged file (onnx raises DecodeError and friends): rewrite it
            logger.warning("ignoring the dequantized model %s: %s", path, exc)
        else:
            with suppress(OSError):  # an image's cache is read-only: its model is never removed
                os.utime(path)  # used: the last to be removed
            return Dequantized(kept, proto, named)
    try:
        proto = onnx.load_from_string(model)
        count = dequantize_vocoder(proto)
    except Exception as exc:  # onnx's parser raises assorted errors, the rewrite ValueError
        logger.warning("the vocoder's convolutions stay int8: %s", exc)
        return None
    if count == 0:
        logger.info("the vocoder has no quantized convolutions: the model runs as it is")
        return None
    unshare_norms(proto.graph)
    rewritten: bytes = proto.SerializeToString()
    logger.info("dequantized the vocoder's %d convolutions", count)
    _keep(rewritten, path)
    return Dequantized(rewritten, proto, named)


def _keep(model: bytes, path: Path) -> None:
    """Write ``model`` to ``path`` (atomically), then remove all but the :data:`_KEPT_MODELS` used last."""
    partial = partial_of(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(model)
        partial.replace(path)
    except OSError as exc:  # a read-only cache (an image's) or a full disk
        logger.info("the dequantized model is not kept: %s", exc)
        with suppress(OSError):
            partial.unlink(missing_ok=True)
        return
    prune_to_used_last(path.parent, ".onnx", _KEPT_MODELS)
