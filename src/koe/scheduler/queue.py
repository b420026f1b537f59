"""Earliest-deadline-first dispatch of blocking jobs to a fixed set of worker threads.

All bookkeeping runs on the event loop (no locks): :meth:`Scheduler.submit` pushes a job onto a heap
ordered by playback deadline, and whenever a worker is free the job whose listener runs out of audio first
is handed to the thread pool. A job's future is the only handle a caller keeps: cancelling it drops the job
if it has not started, and discards its result if it has (the job's own cancel flag stops its engine run:
:class:`koe.engine.base.Cancel`).
Jobs submitted with :meth:`Scheduler.submit_batched` share calls with their group's other jobs
(:mod:`koe.scheduler.batch`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from koe.errors import KoeError, OverloadedError
from koe.scheduler.batch import BatchGroup, CallObserver, hold_until

logger = logging.getLogger(__name__)

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - a batch item, as in koe.scheduler.batch

#: The least retry hint we give: below this a client would only hammer a saturated queue.
MIN_RETRY_AFTER_S = 1.0


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """Counters since start; ``queued`` and ``running`` are the current depth."""

    queued: int
    running: int
    completed: int
    failed: int
    dropped: int  # cancelled before a worker took them
    discarded: int  # finished after their caller had gone
    refused: int  # turned away by admission control


@dataclass(order=True, slots=True)
class _Job(Generic[T]):
    """A queued job; a batched one (``group`` set) runs ``work`` (its preparation, if any) first, then
    waits with ``work`` cleared for a call of its group."""

    deadline: float
    seq: int
    work: Callable[[], Any] | None = field(compare=False)
    cost_s: float = field(compare=False)
    future: asyncio.Future[T] = field(compare=False)
    queued: bool = field(default=True, compare=False)
    group: BatchGroup[Any, T] | None = field(default=None, compare=False)
    item: Any = field(default=None, compare=False)
    hold_until: float | None = field(default=None, compare=False)
    exclusive: bool = field(default=False, compare=False)
    interrupt: Callable[[], None] | None = field(default=None, compare=False)


class Scheduler:
    """Runs ``Callable[[], T]`` jobs on ``workers`` threads, earliest playback deadline first.

    Args:
        workers: threads running jobs at once (one engine call each).
        max_queued: admission bound: a job submitted with ``admit=True`` is refused once this many
            jobs wait; continuations of admitted work are never refused, so a started turn finishes.
        batch_window_s: how long a batch group's call that could take more jobs may wait for them (never
            past a boarded job's latest start); 0 never waits.
        observer: told the size and wall time of every batch group call.
    """

    def __init__(
        self,
        workers: int,
        max_queued: int,
        *,
        batch_window_s: float = 0.0,
        observer: CallObserver | None = None,
    ) -> None:
        if workers < 1 or max_queued < 1:
            raise ValueError(f"expected workers >= 1 and max_queued >= 1, got {workers} and {max_queued}")
        if not batch_window_s >= 0:
            raise ValueError(f"expected batch_window_s >= 0, got {batch_window_s}")
        self.workers = workers
        self.max_queued = max_queued
        self.batch_window_s = batch_window_s
        self._observer = observer
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="koe-worker")
        self._heap: list[_Job[Any]] = []
        self._seq = itertools.count()
        self._queued = 0
        self._queued_cost_s = 0.0
        self._running: dict[asyncio.Future[Any], int] = {}  # each running call → the jobs it runs
        self._busy: set[BatchGroup[Any, Any]] = set()  # groups with a call running
        self._wake: asyncio.TimerHandle | None = None
        self._closed = False
        self._completed = self._failed = self._dropped = self._discarded = self._refused = 0
        self._started = 0  # calls handed to a worker: plain jobs, preparations and batch calls
        self._exclusive: asyncio.Future[Any] | None = None  # the exclusive job running, if one is
        self._interrupt: Callable[[], None] | None = None  # how to stop it, until another job comes
        self._idle = asyncio.Event()  # nothing queued or running
        self._idle.set()

    @property
    def stats(self) -> SchedulerStats:
        return SchedulerStats(
            queued=self._queued,
            running=sum(self._running.values()),
            completed=self._completed,
            failed=self._failed,
            dropped=self._dropped,
            discarded=self._discarded,
            refused=self._refused,
        )

    async def quiet(self, quiet_s: float) -> None:
        """Return once nothing has been queued or running for ``quiet_s`` seconds. Cancelling is safe."""
        while True:
            await self._idle.wait()
            started = self._started
            await asyncio.sleep(quiet_s)
            if self._idle.is_set() and self._started == started:
                return

    def retry_after_s(self) -> float:
        """How long the queued work should take to drain: the hint sent with a refusal."""
        return max(MIN_RETRY_AFTER_S, self._queued_cost_s / self.workers)

    def admit(self) -> None:
        """Admission control for new work (a turn or request), before or without submitting a job.

        Raises:
            OverloadedError: the queue is full (counted as refused), or the scheduler is closed.
        """
        if self._closed:
            raise OverloadedError(
                "the server is shutting down", code="shutting_down", retry_after_s=MIN_RETRY_AFTER_S
            )
        if self._queued >= self.max_queued:
            self._refused += 1
            retry = self.retry_after_s()
            raise OverloadedError(
                f"synthesis queue is full ({self._queued} jobs waiting, limit {self.max_queued}); "
                f"retry in {retry:.1f} s",
                retry_after_s=retry,
            )

    def submit(
        self, work: Callable[[], T], *, deadline: float, cost_s: float, admit: bool = False
    ) -> asyncio.Future[T]:
        """Queue ``work`` to run in a worker thread; must be called on the event loop.

        Args:
            work: the blocking call; its return value or exception becomes the future's.
            deadline: loop-clock time by which its listener needs the result (smaller runs first).
            cost_s: estimated run time, used for retry hints.
            admit: apply admission control (the first job of a new turn or request).

        Returns:
            A future the caller awaits or cancels; cancelling is always safe.

        Raises:
            OverloadedError: ``admit`` is set and the queue is full, or the scheduler is closed.
        """
        return self._enqueue(work, None, None, deadline, cost_s, admit)

    def submit_exclusive(
        self,
        work: Callable[[], T],
        *,
        deadline: float,
        cost_s: float,
        interrupt: Callable[[], None] | None = None,
    ) -> asyncio.Future[T]:
        """Like :meth:`submit`, for work that must run with no other job beside it (a measurement of the
        machine's speed): it starts once nothing runs, and nothing starts while it runs. ``interrupt`` is
        called (on the event loop) as soon as another job is submitted while it runs: work that can stop
        early then lets that job start at once instead of after it."""
        return self._enqueue(work, None, None, deadline, cost_s, False, exclusive=True, interrupt=interrupt)

    def submit_batched(
        self, item: I, group: BatchGroup[I, T], *, deadline: float, cost_s: float, admit: bool = False
    ) -> asyncio.Future[T]:
        """Queue ``item`` to be prepared, then run in one call with other items of ``group`` (see
        :mod:`koe.scheduler.batch`); arguments, result and errors as for :meth:`submit`."""
        work = partial(group.prepare, item) if group.prepare is not None else None
        return self._enqueue(work, group, item, deadline, cost_s, admit)

    def _enqueue(
        self,
        work: Callable[[], Any] | None,
        group: BatchGroup[Any, T] | None,
        item: Any,
        deadline: float,
        cost_s: float,
        admit: bool,
        exclusive: bool = False,
        interrupt: Callable[[], None] | None = None,
    ) -> asyncio.Future[T]:
        if admit:
            self.admit()
        elif self._closed:
            raise OverloadedError(
                "the server is shutting down", code="shutting_down", retry_after_s=MIN_RETRY_AFTER_S
            )
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(
            deadline,
            next(self._seq),
            work,
            cost_s,
            loop.create_future(),
            group=group,
            item=item,
            exclusive=exclusive,
            interrupt=interrupt,
        )
        if not exclusive and self._interrupt is not None:
            stop, self._interrupt = self._interrupt, None
            stop()
        self._push(job)
        job.future.add_done_callback(lambda _: self._forget(job))
        self._dispatch()
        return job.future

    def _push(self, job: _Job[Any]) -> None:
        heapq.heappush(self._heap, job)
        job.queued = True
        self._queued += 1
        self._queued_cost_s += job.cost_s
        self._idle.clear()

    def _forget(self, job: _Job[Any]) -> None:
        """A queued job's caller cancelled it: stop counting it now, drop it from the heap lazily."""
        if job.future.cancelled() and job.queued:
            self._unqueue(job)
            self._dropped += 1

    def _unqueue(self, job: _Job[Any]) -> None:
        job.queued = False
        self._queued -= 1
        self._queued_cost_s = max(0.0, self._queued_cost_s - job.cost_s)
        self._note_idle()

    def _note_idle(self) -> None:
        if not self._queued and not self._running:
            self._idle.set()

    def _dispatch(self) -> None:
        """Start what can start, earliest deadline first: plain jobs and preparations on any free worker,
        a batch group's call when the group has none running (and its hold, if any, is over)."""
        waiting: list[_Job[Any]] = []  # prepared jobs whose group has a call running, or is held
        held: set[BatchGroup[Any, Any]] = set()
        while self._heap and len(self._running) < self.workers and self._exclusive is None:
            job = heapq.heappop(self._heap)
            if job.future.done():
                continue  # cancelled while queued, already counted as dropped
            if job.exclusive and self._running:
                waiting.append(job)  # until the running ones end; what is due sooner still starts
                continue
            if job.work is not None:
                self._start(job)
                continue
            group = job.group
            assert group is not None  # a job without work is a prepared batch job
            if group in self._busy or group in held:
                waiting.append(job)
                continue
            members = [job, *self._mates(group, group.max_size - 1)]
            if len(members) < group.max_size and self._held(members):
                held.add(group)  # waits for mates; everything else behind it goes on
                waiting += members
                continue
            self._start_call(group, members)
        for job in waiting:
            heapq.heappush(self._heap, job)

    def _mates(self, group: BatchGroup[Any, Any], count: int) -> list[_Job[Any]]:
        """Up to ``count`` prepared jobs of ``group`` from the queue, earliest deadline first."""
        mates = sorted(j for j in self._heap if j.group is group and j.work is None and not j.future.done())
        mates = mates[:count]
        if mates:
            boarded = {id(j) for j in mates}
            self._heap = [j for j in self._heap if id(j) not in boarded]
            heapq.heapify(self._heap)
        return mates

    def _held(self, members: list[_Job[Any]]) -> bool:
        """Whether a call not yet full waits (once, up to the batch window) for more jobs."""
        if self.batch_window_s <= 0:
            return False
        now = time.monotonic()  # the clock deadlines are given in
        head = members[0]
        if head.hold_until is None:
            head.hold_until = hold_until(now, self.batch_window_s, [m.deadline - m.cost_s for m in members])
        if now >= head.hold_until:
            return False
        loop = asyncio.get_running_loop()
        wake_at = loop.time() + (head.hold_until - now)
        if self._wake is None or self._wake.when() > wake_at:
            if self._wake is not None:
                self._wake.cancel()
            self._wake = loop.call_at(wake_at, self._woken)
        return True

    def _woken(self) -> None:
        self._wake = None
        if not self._closed:
            self._dispatch()

    def _start(self, job: _Job[Any]) -> None:
        assert job.work is not None
        self._unqueue(job)
        running = asyncio.get_running_loop().run_in_executor(self._executor, job.work)
        self._running[running] = 1
        if job.exclusive:
            self._exclusive, self._interrupt = running, job.interrupt
        self._started += 1
        self._idle.clear()
        running.add_done_callback(partial(self._finished, job))

    def _start_call(self, group: BatchGroup[Any, Any], members: list[_Job[Any]]) -> None:
        for member in members:
            self._unqueue(member)
        self._busy.add(group)
        futures = [member.future for member in members]
        items = [member.item for member in members]
        running = asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, group, items, futures
        )
        self._running[running] = len(members)
        self._started += 1
        self._idle.clear()
        running.add_done_callback(partial(self._call_finished, group, members))

    def _call(
        self, group: BatchGroup[Any, Any], items: list[Any], futures: list[asyncio.Future[Any]]
    ) -> Sequence[Any]:
        """One batch call, in the worker thread. ``cancelled`` reads the futures' state across threads:
        a racy read of one flag, at worst one more item decoded whose result is then discarded."""
        started = time.perf_counter()
        results = group.run(items, lambda index: futures[index].done())
        if len(results) != len(items):
            raise RuntimeError(f"a batch call returned {len(results)} results for {len(items)} items")
        if self._observer is not None:
            self._observer.engine_call(len(items), time.perf_counter() - started)
        return results

    def _finished(self, job: _Job[Any], done: asyncio.Future[Any]) -> None:
        self._running.pop(done, None)
        if self._exclusive is done:
            self._exclusive = self._interrupt = None
        self._note_idle()
        if done.cancelled():  # the executor shut down before the job started
            job.future.cancel()
            return
        error = done.exception()
        if job.group is not None and error is None and not job.future.done():
            job.work = None  # prepared: now it waits for a call of its group
            self._push(job)
        else:
            self._settle(job, None if error is not None else done.result(), error)
        if not self._closed:
            self._dispatch()

    def _call_finished(
        self, group: BatchGroup[Any, Any], members: list[_Job[Any]], done: asyncio.Future[Any]
    ) -> None:
        self._running.pop(done, None)
        self._note_idle()
        self._busy.discard(group)
        if done.cancelled():
            for member in members:
                member.future.cancel()
            return
        error = done.exception()
        results: Sequence[Any] = [error] * len(members) if error is not None else done.result()
        for member, result in zip(members, results, strict=True):
            failed = result if isinstance(result, BaseException) else None
            self._settle(member, None if failed else result, failed)
        if not self._closed:
            self._dispatch()

    def _settle(self, job: _Job[Any], result: Any, error: BaseException | None) -> None:
        if job.future.done():
            self._discarded += 1
            if isinstance(error, KoeError):  # a failure koe raises on purpose; its message may quote the text
                logger.warning("a discarded job failed: %s", error.code)
            elif error is not None:
                logger.warning("a discarded job failed", exc_info=error)
        elif error is not None:
            self._failed += 1
            job.future.set_exception(error)
        else:
            self._completed += 1
            job.future.set_result(result)

    async def aclose(self, timeout_s: float) -> None:
        """Refuse new jobs, cancel queued ones, wait up to ``timeout_s`` for running ones; idempotent."""
        self._closed = True
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        for job in self._heap:
            job.future.cancel()
        self._heap.clear()
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=timeout_s)
            if late:
                logger.warning(
                    "%d synthesis jobs still running after %.1f s; abandoning them", len(late), timeout_s
                )
        self._executor.shutdown(wait=False, cancel_futures=True)
