"""The acoustic core (:func:`koe.engine.kmodel.forward.acoustic_core`) replayed from CUDA graphs, one per
bucket shape, so that a pass launches the core's ~2,000 operators as one graph.

A graph replays fixed addresses, so each one reads its inputs from, and writes its outputs to, buffers of
its own shape: inputs are copied in before a replay and the outputs copied out right after. Graphs of
different shapes share those buffers (views of one flat buffer per tensor, :class:`_Arena`) and one memory
pool for what they compute in between, so the memory held is that of the largest graph, not of their sum.
That is safe because a replay writes every intermediate before it reads it, nothing read outside a
replay lives in the pool (weight norm leaves the last capture's weights on its modules, but recomputes
them before every use), and replays never overlap: the caller serializes them (the engine's lock) and
takes the outputs before the next one. A shape without a graph runs the core eagerly.

Each capture is checked at once: its replay must give what the eager core gave on the same inputs
(:data:`REPLAY_TOLERANCE`), else ``SynthesisError``, and the engine runs eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TypeVar

import torch

from koe.engine.kmodel.forward import AcousticCore, CoreInputs, CoreOutputs
from koe.errors import SynthesisError

Tensors = TypeVar("Tensors", CoreInputs, CoreOutputs)

#: Largest relative difference (‖replay − eager‖ / ‖eager‖, per output) a capture may show. A graph that
#: reads or writes the wrong buffers is off by the order of the signal; kernels chosen differently under
#: capture differ by float rounding, far below this and below what batching itself changes (tests accept
#: 0.25 dB log-mel between a member and itself alone).
REPLAY_TOLERANCE = 1e-3


class _Arena:
    """One flat device buffer per tensor name, viewed at each graph's shape; grows when a shape needs more
    (graphs already captured keep the buffer they were captured on)."""

    def __init__(self) -> None:
        self._flat: dict[str, torch.Tensor] = {}

    def like(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        flat = self._flat.get(name)
        if flat is None or flat.numel() < tensor.numel() or flat.dtype != tensor.dtype:
            flat = torch.empty(tensor.numel(), dtype=tensor.dtype, device=tensor.device)
            self._flat[name] = flat
        return flat[: tensor.numel()].view(tensor.shape)

    def matching(self, prefix: str, tensors: Tensors) -> Tensors:
        """Buffers shaped as each of ``tensors``' fields, ``prefix`` naming which set."""
        views = (self.like(f"{prefix}.{f.name}", getattr(tensors, f.name)) for f in fields(tensors))
        return type(tensors)(*views)


class _Graph:
    """One shape's capture: its input and output buffers and the graph between them."""

    def __init__(self, graph: torch.cuda.CUDAGraph, inputs: CoreInputs, outputs: CoreOutputs) -> None:
        self._graph = graph
        self._inputs = inputs
        self._outputs = outputs

    def __call__(self, inputs: CoreInputs) -> CoreOutputs:
        _copy(inputs, self._inputs)
        self._graph.replay()
        return CoreOutputs(*(getattr(self._outputs, field.name).clone() for field in fields(CoreOutputs)))


def _shape(inputs: CoreInputs) -> tuple[int, int]:
    return inputs.text.shape[0], inputs.text.shape[-1]


class AcousticGraphs:
    """:data:`AcousticCore` from a CUDA graph where one was captured for the shape, else eager. Not
    thread-safe: calls and captures must be serialized by the caller."""

    def __init__(self, core: AcousticCore) -> None:
        self._core = core
        self._graphs: dict[tuple[int, int], _Graph] = {}
        self._arena = _Arena()
        self._pool = torch.cuda.graph_pool_handle()

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The (rows, width) shapes that replay a graph."""
        return sorted(self._graphs)

    def __call__(self, inputs: CoreInputs) -> CoreOutputs:
        graph = self._graphs.get(_shape(inputs))
        return graph(inputs) if graph is not None else self._core(inputs)

    def capture(self, inputs: CoreInputs) -> None:
        """Capture the core at ``inputs``' shape and check one replay against the eager core on them.
        Capture the largest shapes first: the shared buffers are then allocated once.

        Raises:
            SynthesisError: capture failed, or the replay differs from the eager core.
        """
        eager = self._core(inputs)
        static = self._arena.matching("in", inputs)
        outputs = self._arena.matching("out", eager)
        _copy(inputs, static)
        graph = torch.cuda.CUDAGraph()
        try:
            _warm_on_side_stream(lambda: self._core(static))
            with torch.cuda.graph(graph, pool=self._pool):
                _copy(self._core(static), outputs)  # the core's own outputs go back to the pool
        except RuntimeError as exc:
            raise SynthesisError(f"capturing the acoustic core at {_shape(inputs)} failed: {exc}") from exc
        captured = _Graph(graph, static, outputs)
        replayed = captured(inputs)
        for field in fields(CoreOutputs):
            got, want = getattr(replayed, field.name), getattr(eager, field.name)
            error = _relative_error(got, want)
            if error > REPLAY_TOLERANCE:
                raise SynthesisError(
                    f"the graph of the acoustic core at {_shape(inputs)} replays {field.name} "
                    f"{error:.3g} away from the eager core (expected at most {REPLAY_TOLERANCE:g})"
                )
        self._graphs[_shape(inputs)] = captured


def _copy(source: Tensors, target: Tensors) -> None:
    for field in fields(source):
        getattr(target, field.name).copy_(getattr(source, field.name))


def _warm_on_side_stream(run: Callable[[], object]) -> None:
    """One eager run on a side stream before capture, as PyTorch's CUDA-graph notes ask: lazy initialization
    happens here, not inside the graph."""
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch declares no types for it
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    if got.shape != want.shape:
        return float("inf")
    scale = float(torch.linalg.vector_norm(want.float())) or 1.0
    return float(torch.linalg.vector_norm((got - want).float())) / scale
