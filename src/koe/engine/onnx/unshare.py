"""Instance norms whose normalized tensor is read far apart: each later reader gets a copy of its own.

In Kokoro's export the generator's three parallel resblocks of a stage all start by normalizing the same
input, and the export computes that normalization once: ``(x - mean) / std`` is one tensor read by the
first norm of each resblock. ONNX Runtime runs the resblocks one after another, so that tensor stays
allocated from the first resblock to the third, beside the block's input, the sum of the resblocks done and
the running resblock's own tensors: the sixth full-length tensor alive at a decode's peak (in the last stage
128 channels at 4,800 steps a second of audio). Recomputing it for the second and third resblock, a
subtraction and a division each over a tensor the following convolutions read seven to eleven times,
costs nothing measurable and frees that tensor: a whole decode holds a ninth less at its peak
(docs/operations.md, "Memory"). The copies compute the same values from the same tensors, so the audio is
the same to the bit.

ONNX Runtime's common-subexpression elimination would merge the copies back; the sessions run without it
(:data:`koe.engine.onnx.sessions.DISABLED_OPTIMIZERS`), which finds nothing to merge in the export as it is.
"""

from __future__ import annotations

from collections import defaultdict

import onnx


def unshare_norms(graph: onnx.GraphProto) -> int:
    """Give every reader but the first of a normalized tensor (``Div(Sub(x, ReduceMean(x)), std)``) its own
    ``Sub`` and ``Div`` of the same inputs, placed just before that reader; returns the copies made. The
    graph's inputs, outputs and statistics are unchanged."""
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            readers[name].append(node)
    before: dict[int, list[onnx.NodeProto]] = defaultdict(list)  # by the reader's id
    for node in list(graph.node):
        if not _is_normalized(node, producer):
            continue
        centred = producer[node.input[0]]
        for number, reader in enumerate(readers[node.output[0]][1:], start=1):
            own_centred = _copy(centred, number)
            own = _copy(node, number)
            own.input[0] = own_centred.output[0]
            reader.input[:] = [own.output[0] if name == node.output[0] else name for name in reader.input]
            before[id(reader)] += [own_centred, own]
    if not before:
        return 0
    nodes = [added for node in graph.node for added in (*before.get(id(node), ()), node)]
    del graph.node[:]
    graph.node.extend(nodes)
    return sum(len(copies) for copies in before.values()) // 2


def _is_normalized(node: onnx.NodeProto, producer: dict[str, onnx.NodeProto]) -> bool:
    """``node`` is ``Div(Sub(x, ReduceMean(x)), ...)``: the output of an instance norm before its affine."""
    if node.op_type != "Div":
        return False
    centred = producer.get(node.input[0])
    if centred is None or centred.op_type != "Sub":
        return False
    mean = producer.get(centred.input[1])
    return mean is not None and mean.op_type == "ReduceMean" and mean.input[0] == centred.input[0]


def _copy(node: onnx.NodeProto, number: int) -> onnx.NodeProto:
    copied = onnx.NodeProto()
    copied.CopyFrom(node)
    copied.name = f"{node.name or node.output[0]}/unshared_{number}"
    copied.output[:] = [f"{output}/unshared_{number}" for output in node.output]
    return copied
