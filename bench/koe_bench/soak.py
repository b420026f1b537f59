"""Soak: mixed clients against one koe server for minutes, its resident memory sampled, its errors counted.

A server that runs for weeks must not grow: after a warm-up (allocator arenas, caches, the cost model
settling) its RSS should stay flat while sessions come and go. Each client loops over the ways koe is used:
a WebSocket turn heard to its end, a turn barged in on (``cancel``), a client that vanishes mid-turn, a
SageMaker ``/invocations`` request and an OpenAI ``/v1/audio/speech`` request. Hostile clients
(:mod:`koe_bench.hostile`) loop over attacks meanwhile, each expecting its documented refusal. ``koe soak``
starts the server as a subprocess (or takes ``--url``/``--pid``); the test suite runs a short soak
in-process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection, connect

from koe.errors import UpstreamError
from koe.server.background import LOOPBACK
from koe_bench.hostile import HOSTILE_ACTIONS, LONG_ACTIONS, Action
from koe_bench.hostile_inputs import LONG_NUMBERS, log_findings
from koe_bench.target import wait_ready
from koe_bench.tether import tethered

#: Short texts: the soak exercises session churn and every code path, not synthesis throughput.
_SHORT = "Hi there, this is a short answer."
_LONG = "This answer goes on for a while. It has a second sentence. And a third one that nobody hears."
#: How long one client action may take before it counts as a hang (a loaded 2-core machine stays far below).
_ACTION_TIMEOUT_S = 60.0
#: Samples taken around a moment and reduced to their median, so one transient spike does not decide.
_SAMPLES_PER_POINT = 3
#: Codes that mean the server failed rather than refused: never expected, whatever the clients do.
INTERNAL_CODES = frozenset({"internal_error", "asset_error"})


#: The server's resident memory may grow this much from the start of a soak (and from the end of its
#: warm-up) to its end.
MAX_GROWTH_PCT = 10.0
#: ``/ping`` must answer within this at every probe while the soak runs: a stalled loop shows there first.
MAX_PING_MS = 50.0
_PING_EVERY_S = 0.25
#: The normal client's turn compared byte for byte with the same turn on the quiet server: one sentence, one
#: segment, a complete file (decoded whole), so nothing in it depends on timing.
_REFERENCE = {"text": "The quick brown fox jumps over the lazy dog.", "format": "pcm", "stream": False}
_REFERENCE_EVERY_S = 5.0
#: What ``koe soak`` starts its server with: no segment cache, so the reference turn is synthesized every
#: time rather than replayed from the cache.
REFERENCE_ENV = {"KOE_SEGMENT_CACHE_MB": "0"}


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of process ``pid`` (this process if ``None``), from Linux's ``/proc``."""
    statm = Path(f"/proc/{pid if pid is not None else 'self'}/statm").read_text()
    return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class SoakReport:
    """What a soak measured; ``growth_pct`` compares the end with the end of the warm-up, when the
    attackers (if any) start."""

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
    ping_ms: list[float] = field(default_factory=list)  # every /ping round trip after the warm-up
    reference_turns: int = 0  # the normal client's turns compared with the quiet server's
    reference_mismatches: int = 0  # ... whose audio differed by a byte
    log_findings: dict[str, int] | None = None  # None: the server's log was not available to check

    @property
    def ping_max_ms(self) -> float:
        return max(self.ping_ms, default=0.0)

    @property
    def ping_p99_ms(self) -> float:
        ordered = sorted(self.ping_ms)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0

    @property
    def checks(self) -> dict[str, bool]:
        """Each condition of a passing soak; the issue's "/ping stays under 50 ms while it runs" is every
        probe, so the maximum is what is checked."""
        return {
            "no_client_failed": not self.client_failures,
            "no_internal_error": not self.internal_errors,
            "refused_nothing_unless_hostile": self.hostile_clients > 0 or not self.server_errors,
            "ping_under_50_ms": bool(self.ping_ms) and self.ping_max_ms < MAX_PING_MS,
            "rss_within_10_pct_of_warm": self.growth_pct < MAX_GROWTH_PCT,
            "reference_turn_unchanged": self.reference_turns > 0 and not self.reference_mismatches,
            "log_clean": not any((self.log_findings or {}).values()),
        }

    @property
    def growth_pct(self) -> float:
        return (self.rss_end_mb / self.rss_warm_mb - 1) * 100 if self.rss_warm_mb else 0.0

    @property
    def internal_errors(self) -> float:
        return sum(count for code, count in self.server_errors.items() if code in INTERNAL_CODES)

    @property
    def passed(self) -> bool:
        """Every one of :attr:`checks`."""
        return all(self.checks.values())

    def summary(self) -> str:
        return (
            f"{sum(self.actions.values())} actions in {self.duration_s / 60:.1f} min with {self.clients} "
            f"clients and {self.hostile_clients} hostile ones "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.actions.items()))}); "
            f"RSS {self.rss_warm_mb:.0f} MB after {self.warmup_s:.0f} s warm-up, {self.rss_end_mb:.0f} MB at "
            f"the end ({self.growth_pct:+.1f} %), peak {self.rss_peak_mb:.0f} MB; "
            f"/ping p99 {self.ping_p99_ms:.1f} ms, max "
            f"{self.ping_max_ms:.1f} ms over {len(self.ping_ms)} probes; reference turn "
            f"{self.reference_turns - self.reference_mismatches}/{self.reference_turns} byte-identical; "
            f"log {self.log_findings if self.log_findings is not None else 'not checked'}; "
            f"server errors {sum(self.server_errors.values()):.0f} {self.server_errors or ''} "
            f"(internal {self.internal_errors:.0f}); "
            f"client failures {sum(self.client_failures.values())} {self.client_failures or ''}"
        )

    def to_json(self) -> str:
        derived = {
            "growth_pct": round(self.growth_pct, 2),
            "internal_errors": self.internal_errors,
            "ping_p99_ms": round(self.ping_p99_ms, 2),
            "ping_max_ms": round(self.ping_max_ms, 2),
            "checks": self.checks,
        }
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
    log: Path | None = None,
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
        log: the server's log, checked at the end for what it must not hold (``None``: not checked).

    Client failures (an action that raised or hung) are counted, never raised; server errors are the
    increase of ``koe_errors_total`` over the run. After the warm-up, another process times ``/ping``
    every quarter second while the attackers (if any) run, and a normal client repeats one turn and
    compares its audio with the same turn taken on the quiet server before the clients start.
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
        reference = await _reference_audio(base_url, http)
        if hostile:
            await _speak_the_attacks_languages(base_url, http)

        async def client(offset: int, actions_: tuple[Action, ...], after_s: float = 0.0) -> None:
            await asyncio.sleep(after_s)
            for n in itertools.count(offset):
                if time.monotonic() >= deadline:
                    return
                action = actions_[n % len(actions_)]
                try:
                    async with asyncio.timeout(LONG_ACTIONS.get(action.__name__, _ACTION_TIMEOUT_S)):
                        await action(base_url, http)
                    actions[action.__name__] += 1
                except Exception as exc:  # counted and reported: a soak measures, it does not stop
                    failures[f"{action.__name__}: {type(exc).__name__}"] += 1

        async def sampler() -> None:
            while time.monotonic() < deadline:
                report.rss_mb.append((round(time.monotonic() - started, 1), rss() / 2**20))
                await asyncio.sleep(sample_every_s)

        async def compare() -> None:
            while time.monotonic() < deadline:
                report.reference_turns += 1
                try:
                    async with asyncio.timeout(_ACTION_TIMEOUT_S):
                        heard = await _reference_audio(base_url, http)
                except Exception as exc:  # counted and reported: a soak measures, it does not stop
                    failures[f"reference_turn: {type(exc).__name__}"] += 1
                    heard = b""
                report.reference_mismatches += heard != reference
                await asyncio.sleep(_REFERENCE_EVERY_S)

        async def probe() -> None:
            await asyncio.sleep(warmup)
            processes = multiprocessing.get_context("spawn")
            to_prober, prober_end = processes.Pipe()
            prober = processes.Process(target=_probe_ping, args=(base_url, prober_end), daemon=True)
            prober.start()
            try:
                await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            finally:
                to_prober.send(None)
                report.ping_ms = await asyncio.to_thread(to_prober.recv)
                await asyncio.to_thread(prober.join)

        # the warm-up is ordinary use (first synthesis, each language's G2P, the arenas); the attacks and
        # the /ping timing start after it, so what they measure is the attacks' doing
        async with asyncio.TaskGroup() as tg:
            tg.create_task(sampler())
            tg.create_task(compare())
            tg.create_task(probe())
            for offset in range(clients):
                tg.create_task(client(offset, ACTIONS))
            for offset in range(hostile):  # spread over the attacks, so each runs early in their time
                first = offset * len(HOSTILE_ACTIONS) // max(1, hostile)
                tg.create_task(client(first, HOSTILE_ACTIONS, after_s=warmup))
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
    if log is not None:
        report.log_findings = log_findings(await asyncio.to_thread(log.read_text, errors="replace"))
    return report


async def _speak_the_attacks_languages(base_url: str, http: httpx.AsyncClient) -> None:
    """One short turn in each voice the attacks use, before the clock starts: a language's G2P is built on
    its first turn (a one-time step of about 100 MB, and a moment the interpreter lock is held), which is
    the server's warm-up, not the attack's doing."""
    for voice, (_, short) in LONG_NUMBERS.items():
        response = await http.post(
            base_url + "/invocations", json={"text": short, "voice": voice, "format": "pcm"}
        )
        if response.status_code != 200:
            raise UpstreamError(
                f"a short turn with {voice} got {response.status_code}: {response.text[:200]}"
            )


async def _reference_audio(base_url: str, http: httpx.AsyncClient) -> bytes:
    response = await http.post(base_url + "/invocations", json=_REFERENCE)
    if response.status_code != 200 or not response.content:
        raise UpstreamError(f"the reference turn got {response.status_code}: {response.text[:200]}")
    return response.content


def _probe_ping(base_url: str, control: Connection) -> None:
    """Time ``/ping`` in milliseconds until ``control`` receives anything, then send the timings back. Run
    in a process of its own: a thread would wait for the GIL behind the soak's clients (a deflate bomb is
    built in Python), and that wait would be counted against the server. A failed probe counts as an
    infinite round trip."""
    timings: list[float] = []
    with httpx.Client(timeout=_ACTION_TIMEOUT_S) as client:
        while not control.poll(_PING_EVERY_S):
            started = time.perf_counter()
            try:
                ok = client.get(base_url + "/ping").status_code == 200
            except httpx.HTTPError:
                ok = False
            timings.append(round((time.perf_counter() - started) * 1000, 2) if ok else math.inf)
    control.send(timings)


# --- a server subprocess -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server_process(
    extra_env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[tuple[str, int]]:
    """``koe serve`` on a free loopback port in a subprocess, its output into ``log`` if given; yields its
    base URL and pid once ready. Stopped after, and on SIGTERM or SIGKILL to this process
    (:func:`~koe_bench.tether.tethered`)."""
    port = free_port()
    command = [sys.executable, "-m", "koe.cli", "serve", "--host", LOOPBACK, "--port", str(port)]
    env = {**os.environ, **(extra_env or {})}
    with (
        log.open("wb") if log is not None else nullcontext() as sink,
        tethered(command, env=env, stdout=sink, stderr=subprocess.STDOUT if sink else None) as process,
    ):
        base_url = f"http://{LOOPBACK}:{port}"
        wait_ready(base_url, alive=lambda: process.poll() is None)
        yield base_url, process.pid
