"""Coalescing: jobs of any session that can share one engine call, and the rule for gathering them.

A job submitted with a :class:`BatchGroup` runs in two steps. Its ``prepare`` (G2P, for a segment) is an
ordinary job on any worker; once prepared, the job waits for a call of its group, which takes every
prepared job of the group that is queued — earliest deadline first, up to ``max_size`` — and runs them
with one ``run``. A group has at most one call running (the device is one), so jobs queue behind a running
call and board the next one together.

When a call could take more jobs than are queued, the scheduler may hold it for the batch window (a few
milliseconds) so that jobs submitted at the same moment board together — but never past the moment the
earliest of them must start to meet its deadline (:func:`hold_until`), so no job is delayed past its
deadline to fill a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

I = TypeVar("I")  # noqa: E741 - the item type, beside R, the result type
R = TypeVar("R")

#: ``cancelled(i)``: the caller of the call's ``i``-th item has gone (its result would be discarded).
Cancelled = Callable[[int], bool]


@dataclass(frozen=True, eq=False, slots=True)
class BatchGroup(Generic[I, R]):
    """Jobs that may share one call.

    Attributes:
        run: in a worker thread, one call for ``items``; returns, per item, its result or the exception
            that item alone failed with (an exception escaping ``run`` fails every item of the call).
        max_size: items per call.
        prepare: in a worker thread, per item, before it can board a call; an exception fails the item.
    """

    run: Callable[[Sequence[I], Cancelled], Sequence[R | BaseException]]
    max_size: int
    prepare: Callable[[I], None] | None = None

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError(f"a batch group takes at least 1 item per call, got {self.max_size}")


class CallObserver(Protocol):
    """Where the scheduler reports each call of a batch group (the server's Prometheus metrics)."""

    def engine_call(self, size: int, seconds: float) -> None:
        """One call ran ``size`` items in ``seconds`` of wall time."""
        ...


def hold_until(now: float, window_s: float, latest_starts: Sequence[float]) -> float:
    """Until when a call not yet full may wait for batch mates: the window, cut short by the latest start
    (deadline − estimated cost) of any job already on board."""
    return min(now + window_s, *latest_starts)
