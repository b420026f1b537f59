"""An app under uvicorn, with koe's own uvicorn configuration, on its own event loop in a thread.

``koe bench`` and the tests use it: their clients reach the server through real loopback sockets exactly as
remote clients would, while the model stays loaded once in this process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette

from koe.errors import UpstreamError
from koe.server.runtime import Runtime
from koe.server.serve import uvicorn_config
from koe.settings import Settings

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
#: uvicorn binds and runs the app's start-up within this; model loading happens before, not here.
START_TIMEOUT_S = 60.0
_POLL_S = 0.05


@dataclass(frozen=True)
class BackgroundServer:
    """A running server: its app, uvicorn's ``Server``, its event loop and thread, its port."""

    app: Starlette
    server: uvicorn.Server
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    port: int

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{LOOPBACK}:{self.port}"

    @property
    def runtime(self) -> Runtime:
        runtime: Runtime = self.app.state.runtime
        return runtime

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's event loop (where its scheduler lives) and return its result."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    def stop(self, timeout_s: float = 60.0) -> None:
        """What SIGTERM does (uvicorn's handler sets ``should_exit``: drain, then stop), then wait."""
        self.server.should_exit = True
        self.thread.join(timeout_s)


def loopback_socket(send_buffer: int | None = None) -> socket.socket:
    """A listening socket on a free loopback port; ``send_buffer`` fixes SO_SNDBUF of accepted sockets."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind((LOOPBACK, 0))
    sock.listen(128)
    return sock


@contextmanager
def serve_in_background(
    app: Starlette,
    settings: Settings,
    sock: socket.socket | None = None,
    *,
    stop_timeout_s: float = 60.0,
    **uvicorn_options: Any,
) -> Iterator[BackgroundServer]:
    """Serve ``app`` until the block ends; yields once uvicorn has started (``/ping`` may still be 503
    while the model warms up). ``uvicorn_options`` override uvicorn's settings (``ws_ping_interval``...).

    Raises:
        UpstreamError: the server stopped or did not start within :data:`START_TIMEOUT_S`.
    """
    sock = sock or loopback_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, settings, host=LOOPBACK, port=port, **uvicorn_options))
    loop = asyncio.new_event_loop()
    ended: concurrent.futures.Future[None] = concurrent.futures.Future()

    def main() -> None:
        try:
            loop.run_until_complete(server.serve(sockets=[sock]))
        finally:
            loop.close()
            ended.set_result(None)

    thread = threading.Thread(target=main, name=f"koe-server-{port}", daemon=True)
    thread.start()
    running = BackgroundServer(app, server, loop, thread, port)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if ended.done() or time.monotonic() > deadline:
                raise UpstreamError(f"the server on port {port} stopped or did not start")
            time.sleep(_POLL_S)
        yield running
    finally:
        running.stop(stop_timeout_s)
        sock.close()
