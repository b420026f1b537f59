"""A real uvicorn server for tests, ready once ``/ping`` answers 200 (koe.server.background underneath)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
from starlette.applications import Starlette

from koe.server.background import LOOPBACK, BackgroundServer, loopback_socket, serve_in_background
from koe.settings import Settings

__all__ = ["LOOPBACK", "LiveServer", "ServerFactory", "loopback_socket", "run_server"]

_READY_TIMEOUT_S = 180.0  # model warm-up on a loaded 2-core machine; never reached when healthy
LiveServer = BackgroundServer

#: ``serve_app``'s type: ``with serve_app(sock=None, **settings) as live: ...``
ServerFactory = Callable[..., AbstractContextManager[LiveServer]]


@contextmanager
def run_server(
    app: Starlette,
    settings: Settings,
    sock: socket.socket | None = None,
    *,
    wait_ready: bool = True,
    **uvicorn_options: Any,
) -> Iterator[LiveServer]:
    """Serve ``app`` with koe's own uvicorn configuration until the block ends; waits for ``/ping`` 200
    unless ``wait_ready`` is false. ``uvicorn_options`` override uvicorn's own settings."""
    with serve_in_background(app, settings, sock, **uvicorn_options) as live:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while wait_ready and httpx.get(live.http_url + "/ping").status_code != 200:
            if time.monotonic() > deadline or not live.thread.is_alive():
                raise RuntimeError("the test server did not become ready")
            time.sleep(0.1)
        yield live
