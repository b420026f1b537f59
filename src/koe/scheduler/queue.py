"""Earliest-deadline-first dispatch of blocking jobs to a fixed set of worker threads.

All bookkeeping runs on the event loop (no locks): :meth:`Scheduler.submit` pushes a job onto a heap
ordered by playback deadline, and whenever a worker is free the job whose listener runs out of audio first
is handed to the thread pool. A job's future is the only handle a caller keeps: cancelling it drops the job
if it has not started, and discards its result if it has (a running inference cannot be interrupted).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from koe.errors import OverloadedError

logger = logging.getLogger(__name__)

T = TypeVar("T")

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
    deadline: float
    seq: int
    work: Callable[[], T] = field(compare=False)
    cost_s: float = field(compare=False)
    future: asyncio.Future[T] = field(compare=False)
    queued: bool = field(default=True, compare=False)


class Scheduler:
    """Runs ``Callable[[], T]`` jobs on ``workers`` threads, earliest playback deadline first.

    Args:
        workers: threads running jobs at once (one engine call each).
        max_queued: admission bound: a job submitted with ``admit=True`` is refused once this many
            jobs wait; continuations of admitted work are never refused, so a started turn finishes.
    """

    def __init__(self, workers: int, max_queued: int) -> None:
        if workers < 1 or max_queued < 1:
            raise ValueError(f"expected workers >= 1 and max_queued >= 1, got {workers} and {max_queued}")
        self.workers = workers
        self.max_queued = max_queued
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="koe-worker")
        self._heap: list[_Job[Any]] = []
        self._seq = itertools.count()
        self._queued = 0
        self._queued_cost_s = 0.0
        self._running: set[asyncio.Future[Any]] = set()
        self._closed = False
        self._completed = self._failed = self._dropped = self._discarded = self._refused = 0

    @property
    def stats(self) -> SchedulerStats:
        return SchedulerStats(
            queued=self._queued,
            running=len(self._running),
            completed=self._completed,
            failed=self._failed,
            dropped=self._dropped,
            discarded=self._discarded,
            refused=self._refused,
        )

    def retry_after_s(self) -> float:
        """How long the queued work should take to drain: the hint sent with a refusal."""
        return max(MIN_RETRY_AFTER_S, self._queued_cost_s / self.workers)

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
        if admit:
            self.check_admission()
        elif self._closed:
            raise OverloadedError(
                "the server is shutting down", code="shutting_down", retry_after_s=MIN_RETRY_AFTER_S
            )
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(deadline, next(self._seq), work, cost_s, loop.create_future())
        heapq.heappush(self._heap, job)
        self._queued += 1
        self._queued_cost_s += cost_s
        job.future.add_done_callback(lambda _: self._forget(job))
        self._dispatch()
        return job.future

    def check_admission(self) -> None:
        """What :meth:`submit` with ``admit`` checks, for new work that needs no job (a cached segment).

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

    def _forget(self, job: _Job[Any]) -> None:
        """A queued job's caller cancelled it: stop counting it now, drop it from the heap lazily."""
        if job.future.cancelled() and job.queued:
            self._unqueue(job)
            self._dropped += 1

    def _unqueue(self, job: _Job[Any]) -> None:
        job.queued = False
        self._queued -= 1
        self._queued_cost_s = max(0.0, self._queued_cost_s - job.cost_s)

    def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._heap and len(self._running) < self.workers:
            job = heapq.heappop(self._heap)
            if job.future.done():
                continue  # cancelled while queued, already counted as dropped
            self._unqueue(job)
            running = loop.run_in_executor(self._executor, job.work)
            self._running.add(running)
            running.add_done_callback(partial(self._finished, job))

    def _finished(self, job: _Job[Any], done: asyncio.Future[Any]) -> None:
        self._running.discard(done)
        if done.cancelled():  # the executor shut down before the job started
            job.future.cancel()
            return
        error = done.exception()
        if job.future.done():
            self._discarded += 1
            if error is not None:
                logger.warning("a discarded job failed", exc_info=error)
        elif error is not None:
            self._failed += 1
            job.future.set_exception(error)
        else:
            self._completed += 1
            job.future.set_result(done.result())
        if not self._closed:
            self._dispatch()

    async def aclose(self, timeout_s: float) -> None:
        """Refuse new jobs, cancel queued ones, wait up to ``timeout_s`` for running ones; idempotent."""
        self._closed = True
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
