"""A loopback TCP proxy whose connections a test can cut: a TTS that restarts, or a network blip.

It runs its own event loop in a thread, so the code under test (in its own server thread) and the test
body both reach it like any remote host. ``cut()`` closes every connection open now; new ones still go
through, as after a restart.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from live_server import LOOPBACK

_COPY_BYTES = 65_536
_STOP_TIMEOUT_S = 10.0


class CuttableProxy:
    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self.connections = 0  # how many connections were accepted, ever
        self.port = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(_COPY_BYTES):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the other side was cut
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        self.connections += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(LOOPBACK, self._target_port)
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))
        self._writers -= {writer, upstream_writer}

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, LOOPBACK, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()

    def run(self) -> None:
        self._loop.run_until_complete(self._start())
        self._loop.run_forever()

    def cut(self) -> None:
        """Close every open connection, both ways, and return once they are closed."""

        async def close_all() -> None:
            for writer in list(self._writers):
                writer.transport.abort()  # a reset, as a crashed peer leaves it

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(_STOP_TIMEOUT_S)

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await asyncio.gather(*self._handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(_STOP_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)


@contextmanager
def cuttable_proxy(target_port: int) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(target_port)
    thread = threading.Thread(target=proxy.run, name="koe-test-proxy", daemon=True)
    thread.start()
    proxy._ready.wait(_STOP_TIMEOUT_S)
    try:
        yield proxy
    finally:
        proxy.stop()
        thread.join(_STOP_TIMEOUT_S)
        proxy._loop.close()
