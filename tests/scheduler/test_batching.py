"""Coalescing with real threads: jobs of a batch group share calls, results and errors go back per job,
no call waits past a job's latest start, a group runs one call at a time."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from koe.scheduler.batch import BatchGroup, Cancelled, hold_until
from koe.scheduler.queue import Scheduler
from ws_events import WAIT_S as _WAIT_S
from ws_events import run

#: A batch window long enough that only a full call or a deadline can end the wait during a test.
LONG_WINDOW_S = 30.0
#: A deadline far enough away that a job has slack for any window used here.
RELAXED_S = 600.0


class Calls:
    """A batch group's ``run`` that records each call's items, can be held, and fails items on demand."""

    def __init__(self, max_size: int = 8) -> None:
        self.calls: list[list[str]] = []
        self.gate: threading.Event | None = None
        self.cancelled_seen: list[list[bool]] = []
        self.group: BatchGroup[str, str] = BatchGroup(self.run, max_size, prepare=self.prepare)
        self.prepared: list[str] = []
        self.started = threading.Event()

    def prepare(self, item: str) -> None:
        if item == "unpreparable":
            raise ValueError("G2P failed for this item")
        self.prepared.append(item)

    def run(self, items: Sequence[str], cancelled: Cancelled) -> list[str | BaseException]:
        self.calls.append(list(items))
        self.started.set()
        if self.gate is not None and not self.gate.wait(_WAIT_S):
            raise TimeoutError("call never released")
        self.cancelled_seen.append([cancelled(i) for i in range(len(items))])
        return [ValueError(f"{item} is bad") if item.startswith("bad") else item.upper() for item in items]


class Observed:
    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []

    def engine_call(self, size: int, seconds: float) -> None:
        self.calls.append((size, seconds))


async def _started(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, _WAIT_S)


async def _until(condition: Callable[[], bool]) -> None:
    """Wait (in a thread, polling) until ``condition`` holds: state changed by worker threads."""

    def poll() -> bool:
        deadline = time.monotonic() + _WAIT_S
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    assert await asyncio.to_thread(poll)


def test_jobs_queued_behind_a_running_call_board_the_next_one_together() -> None:
    async def main() -> None:
        calls, observed = Calls(), Observed()
        scheduler = Scheduler(workers=2, max_queued=10, observer=observed)
        calls.gate = threading.Event()
        first = scheduler.submit_batched("a", calls.group, deadline=0.0, cost_s=0.1)
        await _started(calls.started)
        later = [scheduler.submit_batched(x, calls.group, deadline=1.0, cost_s=0.1) for x in ("b", "c", "d")]
        await _until(lambda: scheduler.stats.queued == 3)  # prepared on the other worker meanwhile
        assert scheduler.stats.queued == 3 and len(calls.calls) == 1  # one call of the group at a time
        calls.gate.set()
        assert await first == "A"
        assert await asyncio.gather(*later) == ["B", "C", "D"]
        assert calls.calls == [["a"], ["b", "c", "d"]]
        assert [size for size, _ in observed.calls] == [1, 3]
        assert scheduler.stats.completed == 4
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_a_call_takes_at_most_max_size_jobs_earliest_deadline_first() -> None:
    async def main() -> None:
        calls = Calls(max_size=2)
        scheduler = Scheduler(workers=2, max_queued=10)
        calls.gate = threading.Event()
        blocker = scheduler.submit_batched("x", calls.group, deadline=0.0, cost_s=0.1)
        await _started(calls.started)
        futures = [
            scheduler.submit_batched(name, calls.group, deadline=deadline, cost_s=0.1)
            for name, deadline in [("late", 3.0), ("first", 1.0), ("middle", 2.0)]
        ]
        await _until(lambda: scheduler.stats.queued == 3)
        calls.gate.set()
        await asyncio.gather(blocker, *futures)
        assert calls.calls == [["x"], ["first", "middle"], ["late"]]
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_each_job_gets_its_own_result_or_its_own_error() -> None:
    async def main() -> None:
        calls = Calls()
        scheduler = Scheduler(workers=2, max_queued=10)
        calls.gate = threading.Event()
        blocker = scheduler.submit_batched("x", calls.group, deadline=0.0, cost_s=0.1)
        await _started(calls.started)
        good = scheduler.submit_batched("good", calls.group, deadline=1.0, cost_s=0.1)
        bad = scheduler.submit_batched("bad one", calls.group, deadline=1.0, cost_s=0.1)
        unpreparable = scheduler.submit_batched("unpreparable", calls.group, deadline=1.0, cost_s=0.1)
        with pytest.raises(ValueError, match="G2P failed"):
            await unpreparable  # fails in its own preparation, before any call
        await _until(lambda: scheduler.stats.queued == 2)
        calls.gate.set()
        assert await good == "GOOD"
        with pytest.raises(ValueError, match="bad one is bad"):
            await bad
        assert await blocker == "X"
        assert calls.calls == [["x"], ["good", "bad one"]]
        assert (scheduler.stats.completed, scheduler.stats.failed) == (2, 2)
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_a_job_cancelled_during_its_call_is_seen_as_cancelled_and_its_result_discarded() -> None:
    async def main() -> None:
        calls = Calls()
        scheduler = Scheduler(workers=1, max_queued=10)
        calls.gate = threading.Event()
        kept = scheduler.submit_batched("kept", calls.group, deadline=0.0, cost_s=0.1)
        await _started(calls.started)
        kept.cancel()
        calls.gate.set()
        await _until(lambda: scheduler.stats.discarded == 1)
        assert calls.cancelled_seen == [[True]]
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_a_call_waits_for_mates_within_the_window_and_starts_once_full() -> None:
    async def main() -> None:
        calls = Calls(max_size=3)
        scheduler = Scheduler(workers=2, max_queued=10, batch_window_s=LONG_WINDOW_S)
        relaxed = time.monotonic() + RELAXED_S
        first = scheduler.submit_batched("a", calls.group, deadline=relaxed, cost_s=0.1)
        second = scheduler.submit_batched("b", calls.group, deadline=relaxed, cost_s=0.1)
        await _until(lambda: scheduler.stats.queued == 2)
        await asyncio.sleep(0.05)
        assert calls.calls == []  # held for mates: not full, lots of slack
        third = scheduler.submit_batched("c", calls.group, deadline=relaxed, cost_s=0.1)
        assert await asyncio.gather(first, second, third) == ["A", "B", "C"]  # full: it starts at once
        assert calls.calls == [["a", "b", "c"]]
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_no_job_waits_for_mates_past_its_latest_start() -> None:
    async def main() -> None:
        calls = Calls(max_size=8)
        scheduler = Scheduler(workers=1, max_queued=10, batch_window_s=LONG_WINDOW_S)
        due_now = time.monotonic()  # a turn's first segment: needed at once
        assert (
            await asyncio.wait_for(
                scheduler.submit_batched("urgent", calls.group, deadline=due_now, cost_s=0.1), _WAIT_S
            )
            == "URGENT"
        )
        assert calls.calls == [["urgent"]]
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_plain_jobs_still_run_while_a_group_call_runs() -> None:
    async def main() -> None:
        calls = Calls()
        scheduler = Scheduler(workers=2, max_queued=10)
        calls.gate = threading.Event()
        held = scheduler.submit_batched("a", calls.group, deadline=0.0, cost_s=0.1)
        await _started(calls.started)
        assert await scheduler.submit(lambda: "plain", deadline=5.0, cost_s=0.1) == "plain"
        calls.gate.set()
        assert await held == "A"
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_the_hold_ends_at_the_earliest_latest_start_of_the_jobs_on_board() -> None:
    assert hold_until(100.0, 0.005, [200.0, 300.0]) == pytest.approx(100.005)
    assert hold_until(100.0, 0.005, [100.002, 300.0]) == pytest.approx(100.002)
    assert hold_until(100.0, 0.005, [99.0]) == 99.0  # already late: no wait at all


def test_a_group_of_size_zero_and_a_negative_window_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BatchGroup(lambda items, cancelled: list(items), 0)
    with pytest.raises(ValueError, match="batch_window_s"):
        Scheduler(workers=1, max_queued=1, batch_window_s=-1.0)
