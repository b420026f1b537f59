"""Soak: mixed clients against one koe server for minutes, its resident memory sampled, its errors counted.

A server that runs for weeks must not grow: after a warm-up (allocator arenas, caches, the cost model
settling) its RSS should stay flat while sessions come and go. Each client loops over the ways koe is used:
a WebSocket turn heard to its end, a turn barged in on (``cancel``), a client that vanishes mid-turn, a
SageMaker ``/invocations`` request and an OpenAI ``/v1/audio/speech`` request. Hostile clients
(:mod:`koe.bench.hostile`) loop over attacks meanwhile, each expecting its documented refusal. ``koe soak``
starts the server as a subprocess (or takes ``--url``/``--pid``); the test suite runs a short soak
in-process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection, connect

from koe.bench.hostile import HOSTILE_ACTIONS, Action
from koe.bench.target import wait_ready
from koe.errors import UpstreamError
from koe.server.background import LOOPBACK

#: Short texts: the soak exercises session churn and every code path, not synthesis throughput.
_SHORT = "Hi there, this is a short answer."
_LONG = "This answer goes on for a while. It has a second sentence. And a third one that nobody hears."
#: How long one client action may take before it counts as a hang (a loaded 2-core machine stays far below).
_ACTION_TIMEOUT_S = 60.0
#: Samples taken around a moment and reduced to their median, so one transient spike does not decide.
_SAMPLES_PER_POINT = 3
#: Codes that mean the server failed rather than refused: never expected, whatever the clients do.
INTERNAL_CODES = frozenset({"internal_error", "asset_error"})


#: The server's resident memory may grow this much from the end of the warm-up to the end of a soak.
MAX_GROWTH_PCT = 10.0


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of process ``pid`` (this process if ``None``), from Linux's ``/proc``."""
    statm = Path(f"/proc/{pid if pid is not None else 'self'}/statm").read_text()
    return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class SoakReport:
    """What a soak measured; ``growth_pct`` compares the end with the end of the warm-up."""

    duration_s: float
    warmup_s: float
    clients: int
    hostile_clients: int = 0
    server_env: dict[str, str] = field(default_factory=dict)  # what the soaked server was started with
    actions: dict[str, int] = field(default_factory=dict)
    client_failures: dict[str, int] = field(default_factory=dict)
    server_errors: dict[str, float] = field(default_factory=dict)
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, MB)
    rss_warm_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_peak_mb: float = 0.0

    @property
    def growth_pct(self) -> float:
        return (self.rss_end_mb / self.rss_warm_mb - 1) * 100 if self.rss_warm_mb else 0.0

    @property
    def internal_errors(self) -> float:
        return sum(count for code, count in self.server_errors.items() if code in INTERNAL_CODES)

    @property
    def passed(self) -> bool:
        """No client failed, the server never failed and grew by less than :data:`MAX_GROWTH_PCT`; with no
        hostile client, it refused nothing."""
        refused_nothing = self.hostile_clients > 0 or not self.server_errors
        grew = self.growth_pct >= MAX_GROWTH_PCT
        return not self.client_failures and not self.internal_errors and refused_nothing and not grew

    def summary(self) -> str:
        return (
            f"{sum(self.actions.values())} actions in {self.duration_s / 60:.1f} min with {self.clients} "
            f"clients and {self.hostile_clients} hostile ones "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.actions.items()))}); "
            f"RSS {self.rss_warm_mb:.0f} MB after {self.warmup_s:.0f} s warm-up, {self.rss_end_mb:.0f} MB at "
            f"the end ({self.growth_pct:+.1f} %), peak {self.rss_peak_mb:.0f} MB; "
            f"server errors {sum(self.server_errors.values()):.0f} {self.server_errors or ''} "
            f"(internal {self.internal_errors:.0f}); "
            f"client failures {sum(self.client_failures.values())} {self.client_failures or ''}"
        )

    def to_json(self) -> str:
        derived = {"growth_pct": round(self.growth_pct, 2), "internal_errors": self.internal_errors}
        return json.dumps({**asdict(self), **derived, "passed": self.passed}, indent=2)


# --- client actions --------------------------------------------------------------------------------------


async def _turn(ws: ClientConnection, text: str) -> None:
    await ws.send(json.dumps({"type": "append", "text": text}))
    await ws.send(json.dumps({"type": "flush"}))


async def _until(ws: ClientConnection, kind: str) -> int:
    """Read up to the JSON message of type ``kind``; returns the audio bytes seen on the way."""
    heard = 0
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            heard += len(frame)
            continue
        message = json.loads(frame)
        if message["type"] == "error":
            raise UpstreamError(f"the server sent an error: {message}")
        if message["type"] == kind:
            return heard


async def _first_audio(ws: ClientConnection) -> None:
    while not isinstance(await ws.recv(), bytes):
        pass


async def ws_heard(base: str, http: httpx.AsyncClient) -> None:
    """A turn listened to until ``flushed``."""
    async with connect(base.replace("http", "ws", 1) + "/v1/stream") as ws:
        await _turn(ws, _SHORT)
        if await _until(ws, "flushed") == 0:
            raise UpstreamError("a turn ended without audio")


async def ws_barge_in(base: str, http: httpx.AsyncClient) -> None:
    """A long turn cancelled at its first audio, then a short one heard in the same session."""
    async with connect(base.replace("http", "ws", 1) + "/v1/stream") as ws:
        await _turn(ws, _LONG)
        await _first_audio(ws)
        await ws.send(json.dumps({"type": "cancel"}))
        await _until(ws, "cancelled")
        await _turn(ws, "Okay.")
        await _until(ws, "flushed")


async def ws_vanish(base: str, http: httpx.AsyncClient) -> None:
    """A client that disappears mid-turn without a closing handshake."""
    ws = await connect(base.replace("http", "ws", 1) + "/v1/stream")
    await _turn(ws, _LONG)
    await _first_audio(ws)
    ws.transport.abort()


async def sagemaker(base: str, http: httpx.AsyncClient) -> None:
    response = await http.post(base + "/invocations", json={"text": _SHORT, "format": "pcm"})
    if response.status_code != 200 or not response.content:
        raise UpstreamError(f"/invocations answered {response.status_code}: {response.text[:200]}")


async def openai(base: str, http: httpx.AsyncClient) -> None:
    body = {"model": "tts-1", "input": _SHORT, "voice": "alloy", "response_format": "mp3"}
    response = await http.post(base + "/v1/audio/speech", json=body)
    if response.status_code != 200 or not response.content:
        raise UpstreamError(f"/v1/audio/speech answered {response.status_code}: {response.text[:200]}")


ACTIONS: tuple[Action, ...] = (ws_heard, ws_barge_in, sagemaker, ws_vanish, openai)


# --- the soak ----------------------------------------------------------------------------------------------


def errors_by_code(metrics_text: str) -> dict[str, float]:
    """``koe_errors_total`` by code from a ``/metrics`` scrape."""
    errors: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "koe_errors":
            for sample in family.samples:
                if sample.name == "koe_errors_total":
                    errors[sample.labels["code"]] = sample.value
    return errors


async def soak(
    base_url: str,
    duration_s: float,
    rss: Callable[[], int],
    *,
    clients: int = 3,
    hostile: int = 0,
    warmup_s: float | None = None,
    sample_every_s: float = 5.0,
    server_env: dict[str, str] | None = None,
) -> SoakReport:
    """Run ``clients`` looping clients (and ``hostile`` attackers) against ``base_url`` for ``duration_s``,
    sampling ``rss()``.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8080``.
        duration_s: how long the clients run.
        rss: the server's resident memory in bytes (another process's, or this one's when in-process).
        clients: concurrent clients (keep within the server's ``max_sessions``).
        hostile: concurrent hostile clients, each looping over :data:`HOSTILE_ACTIONS`.
        warmup_s: where growth is measured from (default: a fifth of the run).
        sample_every_s: RSS sampling period.
        server_env: recorded in the report (the deadlines the hostile actions expect).

    Client failures (an action that raised or hung) are counted, never raised; server errors are the
    increase of ``koe_errors_total`` over the run.
    """
    warmup = duration_s / 5 if warmup_s is None else warmup_s
    report = SoakReport(
        duration_s=duration_s,
        warmup_s=warmup,
        clients=clients,
        hostile_clients=hostile,
        server_env=dict(server_env or {}),
    )
    actions: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    started = time.monotonic()
    deadline = started + duration_s
    async with httpx.AsyncClient(timeout=_ACTION_TIMEOUT_S) as http:
        errors_before = errors_by_code((await http.get(base_url + "/metrics")).text)

        async def client(offset: int, actions_: tuple[Action, ...]) -> None:
            for n in itertools.count(offset):
                if time.monotonic() >= deadline:
                    return
                action = actions_[n % len(actions_)]
                try:
                    async with asyncio.timeout(_ACTION_TIMEOUT_S):
                        await action(base_url, http)
                    actions[action.__name__] += 1
                except Exception as exc:  # counted and reported: a soak measures, it does not stop
                    failures[f"{action.__name__}: {type(exc).__name__}"] += 1

        async def sampler() -> None:
            while time.monotonic() < deadline:
                report.rss_mb.append((round(time.monotonic() - started, 1), rss() / 2**20))
                await asyncio.sleep(sample_every_s)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(sampler())
            for offset in range(clients):
                tg.create_task(client(offset, ACTIONS))
            for offset in range(hostile):  # spread over the attacks, so each runs early in the soak
                tg.create_task(client(offset * len(HOSTILE_ACTIONS) // max(1, hostile), HOSTILE_ACTIONS))
        await asyncio.sleep(1.0)  # let vanished sessions finish ending before the last sample
        report.rss_mb.append((round(time.monotonic() - started, 1), rss() / 2**20))
        errors_after = errors_by_code((await http.get(base_url + "/metrics")).text)
    report.actions = dict(actions)
    report.client_failures = dict(failures)
    report.server_errors = {
        code: value - errors_before.get(code, 0.0)
        for code, value in errors_after.items()
        if value > errors_before.get(code, 0.0)
    }
    after_warmup = [mb for t, mb in report.rss_mb if t >= warmup] or [report.rss_mb[-1][1]]
    report.rss_warm_mb = statistics.median(after_warmup[:_SAMPLES_PER_POINT])
    report.rss_end_mb = statistics.median(after_warmup[-_SAMPLES_PER_POINT:])
    report.rss_peak_mb = max(mb for _, mb in report.rss_mb)
    return report


# --- a server subprocess -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server_process(extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """``koe serve`` on a free loopback port in a subprocess; yields its base URL and pid once ready."""
    port = free_port()
    command = [sys.executable, "-m", "koe.cli", "serve", "--host", LOOPBACK, "--port", str(port)]
    process = subprocess.Popen(command, env={**os.environ, **(extra_env or {})})
    try:
        base_url = f"http://{LOOPBACK}:{port}"
        wait_ready(base_url, alive=lambda: process.poll() is None)
        yield base_url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
