"""Capacity: N sessions at once, each streaming the agent answer; how many stay smooth and prompt.

A round of a level passes when no listener hears an underrun and the first audio *after the answer's first
sentence exists* (p95 where there are ≥ 20 sessions, else the slowest) comes within the threshold: the
delay koe adds, without the LLM's own time to write the sentence. A level runs a few rounds and passes when
most of them do, so one burst of background load does not decide it (a single round once read 1.66 s where
six repeats gave 0.67–0.91 s). Levels double until one fails: a larger N only adds work to the same cores,
so the run stops there instead of spending minutes on a known answer.
RTF under load comes from the server's own ``/metrics`` (synthesis seconds over audio seconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from koe.agent.replay import ReplayPace
from koe.errors import UpstreamError
from koe.pipeline.speech import Speech, SpeechOptions
from koe_bench.config import BenchConfig
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import Summary, summarize, worst_case
from koe_bench.target import bench_settings, in_process_server
from koe_bench.turns import TurnTrace, koe_turn

#: ``koe bench --only capacity``'s report.
SCHEMA = "koe-bench-capacity/1"
JSON_NAME = "capacity.json"
_SYNTHESIS_SUM = "koe_synthesis_seconds_sum"
_AUDIO_TOTAL = "koe_audio_seconds_total"


@dataclass(frozen=True, slots=True)
class Level:
    sessions: int
    first_audio_after_sentence_s: Summary
    gap_count: int
    gap_total_s: float
    rtf: float | None  # server-side synthesis time over audio time during the level; None without metrics
    audio_per_wall_s: float  # seconds of audio delivered per second of wall time, all sessions together
    rounds: int
    rounds_ok: int
    ok: bool  # most rounds passed


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
    rounds_ok = 0
    wall = 0.0
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:
        before = await _synthesis_totals(http)
        for _ in range(rounds):
            started = time.monotonic()
            batch = await asyncio.gather(*(koe_turn(base_url, answer, pace, voice) for _ in range(sessions)))
            wall += time.monotonic() - started
            rounds_ok += round_passes(batch, threshold_s)
            traces += batch
        after = await _synthesis_totals(http)
    rtf = None
    if before is not None and after is not None and after[1] > before[1]:
        rtf = (after[0] - before[0]) / (after[1] - before[1])
    playbacks = [t.playback for t in traces]
    audio = sum(c.duration_s for t in traces for c in t.chunks)
    if audio <= 0:
        raise UpstreamError(f"{sessions} sessions produced no audio")
    level = Level(
        sessions,
        summarize([_after_sentence(t) for t in traces]),
        sum(p.gap_count for p in playbacks),
        sum(p.gap_total_s for p in playbacks),
        rtf,
        audio / wall,
        rounds,
        rounds_ok,
        ok=2 * rounds_ok > rounds,
    )
    return level, traces


def _after_sentence(trace: TurnTrace) -> float:
    return trace.first_audio_s - (trace.first_sentence_at or 0.0)


def round_passes(traces: list[TurnTrace], threshold_s: float) -> bool:
    """One round: no underrun for anyone, and the slowest first audio (p95 from 20) within the threshold."""
    gaps = sum(t.playback.gap_count for t in traces)
    return gaps == 0 and worst_case(summarize([_after_sentence(t) for t in traces])) <= threshold_s


def levels(max_sessions: int) -> list[int]:
    """1, 2, 4, … up to ``max_sessions`` (which is included even when it is not a power of two)."""
    counts = [1]
    while counts[-1] * 2 <= max_sessions:
        counts.append(counts[-1] * 2)
    if counts[-1] != max_sessions:
        counts.append(max_sessions)
    return counts


async def ladder(
    url: str, config: BenchConfig, level_done: Callable[[], None] | None = None
) -> dict[str, Any]:
    """The capacity scenario: levels of :func:`levels` up to ``config.max_sessions``, each of
    ``config.capacity_rounds`` rounds, until the first that fails; ``level_done`` is called after each."""
    tried: list[Level] = []
    for sessions in levels(config.max_sessions):
        level, _ = await run_level(
            url,
            sessions,
            config.answer,
            config.pace,
            config.voice,
            config.ttfa_threshold_s,
            config.capacity_rounds,
        )
        tried.append(level)
        if level_done is not None:
            level_done()
        if not level.ok:
            break
    passing = [level.sessions for level in tried if level.ok]
    return {
        "threshold_s": config.ttfa_threshold_s,
        "rounds": config.capacity_rounds,
        "levels": [asdict(level) for level in tried],
        "max_sessions_ok": max(passing) if passing else None,
        "stopped_early": len(tried) < len(levels(config.max_sessions)),
    }


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """``koe bench --only capacity``: the ladder alone, on one koe server in this process (segment cache
    off, as in the full run), the report."""
    started = time.monotonic()
    settings = bench_settings()
    report = report_head(
        SCHEMA,
        command,
        {"voice": config.voice, **pace_fields(config.pace), "answer": config.answer},
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=True))
    with in_process_server(settings, speech) as url:
        report["capacity"] = asyncio.run(ladder(url, config))
    stamp_end(report, started)
    return report
