"""The scheduler with real blocking jobs on real threads: order, cancellation, admission, shutdown."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from koe.errors import OverloadedError
from koe.scheduler.queue import Scheduler

T = TypeVar("T")
_WAIT_S = 5.0  # generous bound for a thread hand-off on a loaded machine; never reached when correct


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(30):
            return await main()

    return asyncio.run(bounded())


class Gate:
    """A job that holds its worker until released: makes the queue's state observable."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        if not self.release.wait(_WAIT_S):
            raise TimeoutError("gate never released")
        return "gate"

    async def wait_started(self) -> None:
        assert await asyncio.to_thread(self.started.wait, _WAIT_S)


def test_jobs_run_earliest_deadline_first_not_in_submission_order() -> None:
    async def main() -> list[str]:
        scheduler = Scheduler(workers=1, max_queued=10)
        ran: list[str] = []
        gate = Gate()
        blocker = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        futures = [
            scheduler.submit(lambda name=name: ran.append(name), deadline=deadline, cost_s=0.1)
            for name, deadline in [("late", 30.0), ("first", 10.0), ("middle", 20.0), ("tie", 20.0)]
        ]
        gate.release.set()
        await asyncio.gather(blocker, *futures)
        await scheduler.aclose(_WAIT_S)
        return ran

    assert run(main) == ["first", "middle", "tie", "late"]


def test_a_job_cancelled_while_queued_never_runs_and_leaves_the_queue_at_once() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        gate = Gate()
        blocker = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        ran = threading.Event()
        doomed = scheduler.submit(ran.set, deadline=1.0, cost_s=0.1)
        assert scheduler.stats.queued == 1
        doomed.cancel()
        await asyncio.sleep(0)  # done-callbacks run on the next loop iteration
        assert scheduler.stats.queued == 0
        assert scheduler.stats.dropped == 1
        gate.release.set()
        assert await blocker == "gate"
        after = await scheduler.submit(lambda: "after", deadline=2.0, cost_s=0.1)
        assert after == "after"
        assert not ran.is_set()
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_a_job_cancelled_while_running_has_its_result_discarded() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        gate = Gate()
        job = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        job.cancel()
        gate.release.set()
        assert await scheduler.submit(lambda: "next", deadline=1.0, cost_s=0.1) == "next"
        stats = scheduler.stats
        assert (stats.discarded, stats.completed, stats.dropped, stats.running) == (1, 1, 0, 0)
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_admission_refuses_new_work_when_full_but_never_a_continuation() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=2)
        gate = Gate()
        blocker = scheduler.submit(gate, deadline=0.0, cost_s=1.0)
        await gate.wait_started()
        queued = [scheduler.submit(lambda: None, deadline=1.0, cost_s=3.0, admit=True) for _ in range(2)]
        with pytest.raises(OverloadedError) as refused:
            scheduler.submit(lambda: None, deadline=1.0, cost_s=1.0, admit=True)
        assert refused.value.code == "queue_saturated"
        assert refused.value.retry_after_s == pytest.approx(6.0)
        assert "limit 2" in refused.value.message
        continuation = scheduler.submit(lambda: "continued", deadline=2.0, cost_s=1.0)
        gate.release.set()
        await asyncio.gather(blocker, *queued)
        assert await continuation == "continued"
        assert scheduler.stats.refused == 1
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_a_failing_job_raises_in_its_caller_and_the_worker_keeps_serving() -> None:
    def broken() -> None:
        raise ValueError("engine exploded")

    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        with pytest.raises(ValueError, match="engine exploded"):
            await scheduler.submit(broken, deadline=0.0, cost_s=0.1)
        assert await scheduler.submit(lambda: 42, deadline=0.0, cost_s=0.1) == 42
        assert (scheduler.stats.failed, scheduler.stats.completed) == (1, 1)
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_two_workers_run_two_jobs_at_the_same_time() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=2, max_queued=10)
        barrier = threading.Barrier(2, timeout=_WAIT_S)  # breaks (raises) unless both jobs run together
        results = await asyncio.gather(
            *(scheduler.submit(barrier.wait, deadline=0.0, cost_s=0.1) for _ in range(2))
        )
        assert sorted(results) == [0, 1]
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_the_event_loop_keeps_running_while_every_worker_is_busy() -> None:
    """The only worker's job waits for something only the event loop does: run on the loop, it would
    deadlock (and the gate time out) instead of finishing."""

    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        gate = Gate()
        job = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        asyncio.get_running_loop().call_soon(gate.release.set)
        assert await job == "gate"
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_quiet_waits_for_a_running_job_and_then_for_the_quiet_time() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=2, max_queued=10)
        await scheduler.quiet(0.0)  # idle from the start
        gate = Gate()
        job = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        quiet = asyncio.create_task(scheduler.quiet(0.05))
        await asyncio.sleep(0.1)  # longer than the quiet time: a job running is not quiet
        assert not quiet.done()
        gate.release.set()
        await quiet
        assert job.done()
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_quiet_starts_its_wait_again_when_a_job_comes_and_goes_within_it() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        loop = asyncio.get_running_loop()
        quiet = asyncio.create_task(scheduler.quiet(0.2))
        await asyncio.sleep(0.05)
        await scheduler.submit(lambda: None, deadline=0.0, cost_s=0.1)  # in and out within the quiet time
        submitted = loop.time()
        await quiet
        assert loop.time() - submitted >= 0.2  # a whole quiet time after the job, not after the first wait
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_an_exclusive_job_starts_once_nothing_runs_and_nothing_starts_beside_it() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=2, max_queued=10)
        running, exclusive, later = Gate(), Gate(), Gate()
        first = scheduler.submit(running, deadline=0.0, cost_s=0.1)
        await running.wait_started()
        measured = scheduler.submit_exclusive(exclusive, deadline=math.inf, cost_s=0.1)
        await asyncio.sleep(0.05)
        assert not exclusive.started.is_set()  # a worker is free, but a job runs
        running.release.set()
        await first
        await exclusive.wait_started()
        live = scheduler.submit(later, deadline=0.0, cost_s=0.1)  # due at once, yet it waits
        await asyncio.sleep(0.05)
        assert not later.started.is_set() and scheduler.stats.queued == 1
        exclusive.release.set()
        later.release.set()
        assert await measured == await live == "gate"
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_an_exclusive_job_is_interrupted_once_when_another_job_comes_and_then_that_job_runs() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=2, max_queued=10)
        measuring, interrupts = Gate(), []
        exclusive = scheduler.submit_exclusive(
            measuring,
            deadline=math.inf,
            cost_s=0.1,
            interrupt=lambda: (interrupts.append(1), measuring.release.set()),
        )
        await measuring.wait_started()
        assert interrupts == []
        first = scheduler.submit(lambda: "live", deadline=0.0, cost_s=0.1)
        second = scheduler.submit(lambda: "live too", deadline=0.0, cost_s=0.1)
        assert interrupts == [1]  # at once, on the loop, and once
        assert (await exclusive, await first, await second) == ("gate", "live", "live too")
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_close_cancels_queued_jobs_refuses_new_ones_and_is_idempotent() -> None:
    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        gate = Gate()
        running = scheduler.submit(gate, deadline=0.0, cost_s=0.1)
        await gate.wait_started()
        queued = scheduler.submit(lambda: None, deadline=1.0, cost_s=0.1)
        gate.release.set()
        await scheduler.aclose(_WAIT_S)
        assert queued.cancelled()
        assert await running == "gate"
        with pytest.raises(OverloadedError) as refused:
            scheduler.submit(lambda: None, deadline=0.0, cost_s=0.1)
        assert refused.value.code == "shutting_down"
        await scheduler.aclose(_WAIT_S)

    run(main)


def test_invalid_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="workers >= 1"):
        Scheduler(workers=0, max_queued=1)
