"""The server the benchmark talks to: koe's app under uvicorn in this process, or one already running.

In-process, the app runs in the background (:mod:`koe.server.background`), so the benchmark's clients (on
the main loop) reach it through real sockets exactly as a remote client would; the model it serves is the
one the engine benchmarks measure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import httpx

from koe.app import create_app
from koe.errors import UpstreamError
from koe.pipeline.speech import Speech
from koe.server.background import BackgroundServer, serve_in_background
from koe.settings import Settings

#: Model warm-up on a loaded 2-core machine takes seconds; this is never reached when healthy.
READY_TIMEOUT_S = 300.0
_POLL_S = 0.1


def wait_ready(
    base_url: str,
    timeout_s: float = READY_TIMEOUT_S,
    alive: Callable[[], bool] = lambda: True,
    path: str = "/ping",
) -> None:
    """Block until ``GET path`` answers 200 (giving up early once ``alive()`` says the server died, or the
    server says its load ``failed``: it will not become ready, and a borrowed machine's minutes count).

    Raises:
        UpstreamError: no 200 within ``timeout_s``, the server stopped, or its load failed.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline and alive():
        try:
            response = httpx.get(base_url + path, timeout=5.0)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:120]}"
            if _status(response) == "failed":
                raise UpstreamError(f"the server at {base_url} failed to load: {last}")
        except httpx.TransportError as exc:
            last = str(exc)
        time.sleep(_POLL_S)
    raise UpstreamError(f"the server at {base_url} did not become ready (waited ≤ {timeout_s:g} s): {last}")


def _status(response: httpx.Response) -> object:
    """The ``status`` of a ``/ping`` answer (``loading``, ``failed``...), None for any other body."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("status") if isinstance(body, dict) else None


def bench_settings() -> Settings:
    """The server's settings as ``koe serve`` reads them, on a free port, with the segment cache off: a
    benchmark says the same text again and again, and a replay is not synthesis (the openers scenario
    measures the cache on its own). And no admission by the machine's speed: this process also runs the
    ASR, kokoro-onnx and every client, whose CPU the server's meter would charge to its audio; the
    capacity ladder runs on a server of its own with it (:func:`koe_bench.capacity.ladder_settings`)."""
    return replace(Settings.from_env(port=0), segment_cache_mb=0.0, capacity_share=0.0)


@contextmanager
def in_process_server(settings: Settings, speech: Speech) -> Iterator[str]:
    """Serve ``speech`` on a free loopback port until the block ends; yields the base URL once ready."""
    with in_process_app(settings, speech) as running:
        yield running.http_url


@contextmanager
def in_process_app(settings: Settings, speech: Speech) -> Iterator[BackgroundServer]:
    """:func:`in_process_server`, yielding the running app itself (its Wyoming server's port, for one)."""
    app = create_app(settings, speech)
    with serve_in_background(app, settings, stop_timeout_s=settings.shutdown_grace_s + 10) as running:
        wait_ready(running.http_url, alive=running.thread.is_alive)
        yield running
