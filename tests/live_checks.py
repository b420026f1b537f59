"""Checks on a live server shared by the hardening tests: is it still serving, what do its own counters say.

Imported as ``live_checks`` (tests/ is on pytest's path).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_server import LiveServer
from ws_events import WAIT_S, Event, audio, of_type, run, send, until

PCM_BYTES_PER_S = 24_000 * 2
#: What a client must never see: a Python traceback or a path into koe's sources.
LEAK_MARKERS = ("Traceback", 'File "', "site-packages", "/koe/", '.py"', ".py,")


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_serving(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float = WAIT_S) -> None:
    """Until ``url`` answers 200 (connection refused while the process starts is expected).

    Raises:
        RuntimeError: the process exited or ``timeout_s`` passed; with the end of its ``log``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} never answered 200: {log.read_text()[-2000:]}")
        time.sleep(0.2)


def close_code(closed: ConnectionClosed) -> int | None:
    return closed.rcvd.code if closed.rcvd is not None else None


def metric(live: LiveServer, series: str) -> float:
    """One sample of the server's ``/metrics``, e.g. ``koe_queue_depth`` or ``koe_errors_total{code="x"}``."""
    for line in httpx.get(live.http_url + "/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    return 0.0  # a labelled series not yet incremented is not exported


def server_tasks(live: LiveServer) -> int:
    """asyncio tasks alive on the server's event loop (uvicorn's own and every session's)."""
    return live.call(lambda: len(asyncio.all_tasks(live.loop)))


def wait_idle(live: LiveServer, tasks_before: int) -> None:
    """No session open, nothing queued or running, and no more tasks than ``tasks_before``: nothing leaked."""
    wait_for(
        lambda: metric(live, "koe_queue_depth") == 0 and metric(live, "koe_jobs_running") == 0,
        "the scheduler queue to drain",
    )
    wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 0, "every session to end")
    wait_for(lambda: server_tasks(live) <= tasks_before, f"the server's tasks to fall to {tasks_before}")


def no_leak(text: str) -> bool:
    return not any(marker in text for marker in LEAK_MARKERS)


def assert_serving(live: LiveServer) -> bytes:
    """``/ping`` is 200 and a fresh session speaks a short turn completely; returns its PCM."""
    assert httpx.get(live.http_url + "/ping").status_code == 200

    async def turn() -> list[Event]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": "Hi there."})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    events = run(turn)
    flushed = events[-1]
    assert isinstance(flushed, dict) and flushed["audio_s"] > 0.3
    pcm = audio(events)
    assert abs(len(pcm) / PCM_BYTES_PER_S - flushed["audio_s"]) < 0.01
    return pcm


@contextmanager
def failures_logged() -> Iterator[list[logging.LogRecord]]:
    """Every record logged at ERROR or with a traceback while inside: an unexpected failure somewhere."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR or record.exc_info:
                records.append(record)

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield records
    finally:
        root.removeHandler(handler)
