"""A real uvicorn server for tests: koe's own uvicorn configuration, on a free loopback port, in a thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import uvicorn
from starlette.applications import Starlette

from koe.server.runtime import Runtime
from koe.server.serve import uvicorn_config
from koe.settings import Settings

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
_READY_TIMEOUT_S = 180.0  # model warm-up on a loaded 2-core machine; never reached when healthy


@dataclass(frozen=True)
class LiveServer:
    """A real uvicorn server running an app in a thread of this process, on its own event loop."""

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
        """What SIGTERM does (uvicorn's handler sets ``should_exit``), then wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout_s)


#: ``serve_app``'s type: ``with serve_app(sock=None, **settings) as live: ...``
ServerFactory = Callable[..., AbstractContextManager[LiveServer]]


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
def run_server(
    app: Starlette,
    settings: Settings,
    sock: socket.socket | None = None,
    *,
    wait_ready: bool = True,
    **uvicorn_options: Any,
) -> Iterator[LiveServer]:
    """Serve ``app`` with koe's own uvicorn configuration until the block ends; waits for ``/ping`` 200.

    ``uvicorn_options`` override uvicorn's own settings (``ws_ping_interval=0.5``...).
    """
    sock = sock or loopback_socket()
    server = uvicorn.Server(
        uvicorn_config(app, settings, host=LOOPBACK, port=sock.getsockname()[1], **uvicorn_options)
    )
    loop = asyncio.new_event_loop()
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def main() -> None:
        try:
            loop.run_until_complete(server.serve(sockets=[sock]))
        finally:
            loop.close()
            done.set_result(None)

    thread = threading.Thread(target=main, name="koe-test-server", daemon=True)
    thread.start()
    live = LiveServer(app, server, loop, thread, sock.getsockname()[1])
    try:
        deadline = time.monotonic() + _READY_TIMEOUT_S

        def up() -> bool:
            if not wait_ready:
                return server.started
            return server.started and httpx.get(live.http_url + "/ping").status_code == 200

        while not up():
            if time.monotonic() > deadline or done.done():
                raise RuntimeError("the test server did not become ready")
            time.sleep(0.1)
        yield live
    finally:
        live.stop()
        sock.close()
