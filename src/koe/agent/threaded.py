"""Blocking token iterators (llama-cpp-python, boto3's event stream) as async iterators that can be stopped.

The blocking iterator runs in its own thread and hands each item to the event loop; closing the async
iterator sets a flag the thread checks between items, so generation stops within one token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from concurrent.futures import Executor
from typing import TypeVar

T = TypeVar("T")


class _End:
    """Marks the end of the thread's items (a sentinel no source can yield)."""


async def iterate_in_thread(
    open_items: Callable[[threading.Event], Generator[T]], executor: Executor
) -> AsyncGenerator[T]:
    """Run ``open_items(stop)`` in ``executor`` and yield its items on the event loop.

    The queue between the two is unbounded on purpose: a thread cannot await room, and every source
    given here is bounded by its ``max_tokens``. Exceptions from the thread are re-raised here.

    Args:
        open_items: builds and iterates the blocking stream; should return soon after ``stop`` is set.
        executor: where the thread runs (a one-thread executor serializes a model that is not thread-safe).

    Cancelling or closing the returned iterator is safe: the thread is told to stop and is not awaited.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[T | _End | BaseException] = asyncio.Queue()
    stop = threading.Event()

    def put(item: T | _End | BaseException) -> None:
        if stop.is_set():
            return  # the consumer has gone; nobody reads the queue any more
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop closed while the stopped thread was finishing its last token
            stop.set()

    def pump() -> None:
        try:
            items = open_items(stop)
            try:
                for item in items:
                    if stop.is_set():
                        return
                    put(item)
            finally:
                items.close()  # runs the source's own clean-up (closes its HTTP response) in this thread
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(exc)
        finally:
            put(_End())

    loop.run_in_executor(executor, pump)
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
