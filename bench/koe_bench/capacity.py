"""Capacity: N sessions at once, each streaming the agent answer; how many stay smooth and prompt, and at
what cost.

A round of a level passes when no listener hears an underrun and the first audio *after the answer's first
sentence exists* (p95 where there are ≥ 20 sessions, else the slowest) comes within the threshold: the
delay koe adds, without the LLM's own time to write the sentence. A level runs a few rounds and passes when
most of them do, so one burst of background load does not decide it (a single round once read 1.66 s where
six repeats gave 0.67–0.91 s). Levels go 1, 2, 3, 4, then double, until one fails: a larger N only adds work
to the same cores, so the run stops there instead of spending minutes on a known answer.
RTF under load comes from the server's own ``/metrics`` (synthesis seconds over audio seconds). Gaps and
silence are counted per listener (each session of each round is one) as well as in total. A listener the
server refuses (``over_capacity``, ``queue_saturated``...) is counted by its code and heard by nobody: the
level's figures are the admitted listeners', and a level with a refusal does not pass.

Against a server in this process (no ``--url``), each level also says what it cost (:mod:`koe_bench.usage`):
the process's CPU seconds (every thread) and, of them, the clients' share: the CPU time of the thread whose
event loop runs the benchmark's clients (their WebSocket frames, PCM decoding and playback arithmetic).
Audio-seconds per CPU-second counts the rest, the server's. Each level's peak resident memory is its own
(the high-water mark is reset before it) and is set against the resident memory when the ladder starts: at
ready when the ladder runs alone. After the last level: listeners per core and the cost of a listener-hour
(:func:`listener_hour`) at ``--vcpu-price`` (:data:`~koe_bench.config.VCPU_PRICE_USD_PER_HOUR` by default).

``--hog K`` runs K busy processes (a pure-Python loop each, tethered to the benchmark) beside the whole
ladder: a neighbour keeping K cores busy. One listener beside one busy core:

    koe bench --only capacity --hog 1 --max-sessions 1
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from koe.agent.replay import ReplayPace
from koe.errors import UpstreamError
from koe.machine import usable_cores
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench.config import BenchConfig
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import Summary, summarize, worst_case
from koe_bench.target import bench_settings, in_process_server
from koe_bench.tether import tethered
from koe_bench.turns import TurnTrace, koe_turn
from koe_bench.usage import Meter, Spent, status_mb

#: ``koe bench --only capacity``'s report.
SCHEMA = "koe-bench-capacity/3"
JSON_NAME = "capacity.json"
_SYNTHESIS_SUM = "koe_synthesis_seconds_sum"
_AUDIO_TOTAL = "koe_audio_seconds_total"
#: The error codes of a server turning a listener away (admission control), not failing it.
REFUSALS = frozenset({"over_capacity", "queue_saturated", "too_many_sessions"})
#: Levels go one listener at a time up to here, then double: a small machine's knee lies among the first few,
#: where one listener more or less is the answer (and where admission's first refusal should fall).
EVERY_LEVEL_UP_TO = 4
#: A neighbour keeping one core busy: a tight loop in pure Python, pinned to no core.
_HOG = (sys.executable, "-c", "while True: pass")


@dataclass(frozen=True, slots=True)
class Level:
    """One level's figures over every session of every round; each session is one listener."""

    sessions: int
    first_audio_after_sentence_s: Summary
    #: p95 where there are enough listeners for one (:data:`~koe_bench.stats.MIN_SAMPLES_FOR_P95`), else the
    #: slowest; ``worst_is`` says which ("p95" or "max")
    first_audio_after_sentence_worst_s: float
    worst_is: str
    gap_count: int  # every listener's together
    gap_total_s: float
    gaps_per_listener: Summary
    silence_per_listener_s: Summary
    max_gap_s: float  # the longest any listener heard
    audio_s: float  # every listener's together
    rtf: float | None  # server-side synthesis time over audio time during the level; None without metrics
    audio_per_wall_s: float  # seconds of audio delivered per second of wall time, all sessions together
    rounds: int
    rounds_ok: int
    ok: bool  # most rounds passed and no listener was refused
    refused: dict[str, int]  # listeners refused, by the error code they were refused with


@dataclass(frozen=True, slots=True)
class LevelUsage:
    """What a level cost the process that runs both the server and the clients."""

    cpu_s: float  # every thread
    client_cpu_s: float  # the thread of the clients' event loop
    audio_per_cpu_s: float | None  # audio over the rest (the server's); None where the rest is not > 0
    rss_peak_mb: float | None  # None where the peak cannot be reset (not Linux)
    rss_peak_over_start: float | None  # over the resident memory when the ladder started


@dataclass(frozen=True, slots=True)
class ListenerHour:
    """What one listener served for an hour costs, at ``vcpu_price_usd`` per vCPU-hour.

    *Provisioned* is the machine's share: its cores over the most listeners it keeps smooth, idle time
    included. *Used* is the work alone: CPU-seconds per audio-second at that load (``None`` where the
    server's CPU time is not known, a server elsewhere)."""

    listeners_per_core: float
    provisioned_vcpu_h: float
    provisioned_usd: float
    used_vcpu_h: float | None
    used_usd: float | None
    vcpu_price_usd: float


async def _synthesis_totals(http: httpx.AsyncClient) -> tuple[float, float] | None:
    """(synthesis seconds, audio seconds) so far, from ``/metrics``; None if the server has none."""
    response = await http.get("/metrics")
    if response.status_code != 200:
        return None
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in (_SYNTHESIS_SUM, _AUDIO_TOTAL):
                found[sample.name] = sample.value
    if len(found) != 2:
        return None
    return found[_SYNTHESIS_SUM], found[_AUDIO_TOTAL]


async def run_level(
    base_url: str,
    sessions: int,
    answer: str,
    pace: ReplayPace,
    voice: str,
    threshold_s: float,
    rounds: int = 1,
) -> tuple[Level, list[TurnTrace]]:
    """``rounds`` rounds of ``sessions`` concurrent koe turns; the level's figures (over every session of
    every round) and every trace."""
    traces: list[TurnTrace] = []
    refused: dict[str, int] = {}
    rounds_ok = 0
    wall = 0.0
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:
        before = await _synthesis_totals(http)
        for _ in range(rounds):
            started = time.monotonic()
            outcomes = await asyncio.gather(
                *(_listen(base_url, answer, pace, voice) for _ in range(sessions))
            )
            wall += time.monotonic() - started
            batch = [outcome for outcome in outcomes if isinstance(outcome, TurnTrace)]
            for code in (outcome for outcome in outcomes if isinstance(outcome, str)):
                refused[code] = refused.get(code, 0) + 1
            rounds_ok += round_passes(batch, threshold_s)
            traces += batch
        after = await _synthesis_totals(http)
    rtf = None
    if before is not None and after is not None and after[1] > before[1]:
        rtf = (after[0] - before[0]) / (after[1] - before[1])
    return summarize_level(sessions, traces, rtf, wall, rounds, rounds_ok, refused), traces


async def _listen(base_url: str, answer: str, pace: ReplayPace, voice: str) -> TurnTrace | str:
    """One listener's trace, or the code of :data:`REFUSALS` the server turned it away with."""
    try:
        return await koe_turn(base_url, answer, pace, voice)
    except (UpstreamError, ExceptionGroup) as exc:
        errors = exc.exceptions if isinstance(exc, ExceptionGroup) else (exc,)
        codes = [e.code for e in errors if isinstance(e, UpstreamError) and e.code in REFUSALS]
        if not codes:
            raise
        return codes[0]


def summarize_level(
    sessions: int,
    traces: list[TurnTrace],
    rtf: float | None,
    wall_s: float,
    rounds: int,
    rounds_ok: int,
    refused: dict[str, int] | None = None,
) -> Level:
    """The figures of a level's ``traces``, one per admitted listener; ``refused``: listeners turned away,
    by code."""
    playbacks = [t.playback for t in traces]
    audio = sum(c.duration_s for t in traces for c in t.chunks)
    if audio <= 0:
        raise UpstreamError(f"{sessions} sessions produced no audio")
    first = summarize([_after_sentence(t) for t in traces])
    return Level(
        sessions=sessions,
        first_audio_after_sentence_s=first,
        first_audio_after_sentence_worst_s=worst_case(first),
        worst_is="max" if first.p95 is None else "p95",
        gap_count=sum(p.gap_count for p in playbacks),
        gap_total_s=sum(p.gap_total_s for p in playbacks),
        gaps_per_listener=summarize([p.gap_count for p in playbacks]),
        silence_per_listener_s=summarize([p.gap_total_s for p in playbacks]),
        max_gap_s=max(p.max_gap_s for p in playbacks),
        audio_s=audio,
        rtf=rtf,
        audio_per_wall_s=audio / wall_s,
        rounds=rounds,
        rounds_ok=rounds_ok,
        ok=2 * rounds_ok > rounds and not refused,
        refused=dict(refused or {}),
    )


def level_usage(level: Level, spent: Spent, rss_start_mb: float | None) -> LevelUsage:
    """What ``level`` cost, from what the process ``spent`` over it (measured on the clients' thread)."""
    server_cpu_s = spent.cpu_s - spent.thread_cpu_s
    peak = spent.peak_rss_mb
    return LevelUsage(
        cpu_s=spent.cpu_s,
        client_cpu_s=spent.thread_cpu_s,
        audio_per_cpu_s=level.audio_s / server_cpu_s if server_cpu_s > 0 else None,
        rss_peak_mb=peak,
        rss_peak_over_start=peak / rss_start_mb if peak is not None and rss_start_mb else None,
    )


def listener_hour(
    cores: int, listeners: int, audio_per_cpu_s: float | None, vcpu_price_usd: float
) -> ListenerHour:
    """The cost of a listener-hour on ``cores`` that keep ``listeners`` smooth, the server doing
    ``audio_per_cpu_s`` audio-seconds per CPU-second there.

    Raises:
        ValueError: ``cores`` or ``listeners`` is below 1.
    """
    if cores < 1 or listeners < 1:
        raise ValueError(f"expected cores >= 1 and listeners >= 1, got {cores} and {listeners}")
    provisioned = cores / listeners
    used = None if audio_per_cpu_s is None else 1.0 / audio_per_cpu_s
    return ListenerHour(
        listeners_per_core=listeners / cores,
        provisioned_vcpu_h=provisioned,
        provisioned_usd=provisioned * vcpu_price_usd,
        used_vcpu_h=used,
        used_usd=None if used is None else used * vcpu_price_usd,
        vcpu_price_usd=vcpu_price_usd,
    )


def _after_sentence(trace: TurnTrace) -> float:
    return trace.first_audio_s - (trace.first_sentence_at or 0.0)


def round_passes(traces: list[TurnTrace], threshold_s: float) -> bool:
    """One round: no underrun for anyone, and the slowest first audio (p95 from 20) within the threshold."""
    gaps = sum(t.playback.gap_count for t in traces)
    return gaps == 0 and worst_case(summarize([_after_sentence(t) for t in traces])) <= threshold_s


def levels(max_sessions: int) -> list[int]:
    """Every N up to :data:`EVERY_LEVEL_UP_TO`, then doubling, up to ``max_sessions`` (which is included even
    when the steps miss it)."""
    counts = [1]
    while counts[-1] < max_sessions:
        step = counts[-1] if counts[-1] >= EVERY_LEVEL_UP_TO else 1
        counts.append(min(counts[-1] + step, max_sessions))
    return counts


async def ladder(
    url: str, config: BenchConfig, level_done: Callable[[], None] | None = None
) -> dict[str, Any]:
    """The capacity scenario: levels of :func:`levels` up to ``config.max_sessions``, each of
    ``config.capacity_rounds`` rounds, until the first that fails, beside ``config.hog`` busy processes;
    ``level_done`` is called after each level. A server in this process (``config.url`` is ``None``) also
    gets each level's :class:`LevelUsage`, which resets the process's peak memory (:mod:`koe_bench.usage`):
    the peak before the ladder is kept in the result."""
    in_process = config.url is None
    rss_start = status_mb("VmRSS") if in_process else None
    rss_peak_before = status_mb("VmHWM") if in_process else None
    tried: list[tuple[Level, LevelUsage | None]] = []
    with busy_neighbours(config.hog):
        for sessions in levels(config.max_sessions):
            meter = Meter() if in_process else None
            level, _ = await run_level(
                url,
                sessions,
                config.answer,
                config.pace,
                config.voice,
                config.ttfa_threshold_s,
                config.capacity_rounds,
            )
            tried.append((level, None if meter is None else level_usage(level, meter.stop(), rss_start)))
            if level_done is not None:
                level_done()
            if not level.ok:
                break
    passing = [(level, usage) for level, usage in tried if level.ok]
    cores = usable_cores()
    cost = None
    if passing:
        best, usage = passing[-1]
        cost = listener_hour(
            cores, best.sessions, None if usage is None else usage.audio_per_cpu_s, config.vcpu_price
        )
    return {
        "threshold_s": config.ttfa_threshold_s,
        "rounds": config.capacity_rounds,
        "hog": config.hog,
        "usable_cores": cores,
        "rss_start_mb": rss_start,
        "rss_peak_before_mb": rss_peak_before,
        "levels": [
            {**asdict(level), "usage": None if usage is None else asdict(usage)} for level, usage in tried
        ],
        "max_sessions_ok": passing[-1][0].sessions if passing else None,
        "stopped_early": len(tried) < len(levels(config.max_sessions)),
        "listener_hour": None if cost is None else asdict(cost),
    }


@contextmanager
def busy_neighbours(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes each keeping a core busy while inside, tethered to this one
    (:func:`koe_bench.tether.tethered`): stopped when the block ends, however it ends."""
    with ExitStack() as stack:
        yield [stack.enter_context(tethered(list(_HOG))) for _ in range(count)]


def ladder_settings() -> Settings:
    """The ladder's server: the bench's, with admission as ``koe serve`` reads it. Its meter prices the
    machine from the ladder's first segment on, while nothing else in this process works."""
    return replace(bench_settings(), capacity_share=Settings.from_env(port=0).capacity_share)


def server_fields(settings: Settings) -> dict[str, Any]:
    """What the ladder's figures depend on in its server's settings (``KOE_*`` variables may change them):
    its layout, admission, and how its segments are decoded, which sets the peak memory."""
    layout = settings.layout
    return {
        "workers": layout.workers,
        "threads_per_worker": layout.threads,
        "capacity_share": settings.capacity_share,
        "windowed": settings.windowed,
        "windowed_first": settings.windowed_first,
        "whole_decode_max_s": settings.whole_decode_max_s,
        "float_vocoder": settings.float_vocoder,
    }


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """``koe bench --only capacity``: the ladder alone, on one koe server in this process (segment cache
    off, as in the full run), the report."""
    started = time.monotonic()
    settings = ladder_settings()
    report = report_head(
        SCHEMA,
        command,
        {
            "voice": config.voice,
            **pace_fields(config.pace),
            "answer": config.answer,
            "server": server_fields(settings),
        },
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=True))
    with in_process_server(settings, speech) as url:
        report["capacity"] = asyncio.run(ladder(url, config))
    stamp_end(report, started)
    return report
