"""Capacity: N sessions at once, each streaming the agent answer; how many stay smooth and prompt.

A level passes when no listener hears an underrun and the first audio *after the answer's first
sentence exists* (p95 where there are ≥ 20 sessions, else the slowest) comes within the threshold: the
delay koe adds, without the LLM's own time to write the sentence. Levels double until one fails: a
larger N only adds work to the same cores, so the run stops there instead of spending minutes on a known
answer.
RTF under load comes from the server's own ``/metrics`` (synthesis seconds over audio seconds).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from koe.agent.replay import ReplayPace
from koe.bench.stats import Summary, summarize, worst_case
from koe.bench.turns import TurnTrace, koe_turn
from koe.errors import UpstreamError

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
    ok: bool


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
    base_url: str, sessions: int, answer: str, pace: ReplayPace, voice: str, threshold_s: float
) -> tuple[Level, list[TurnTrace]]:
    """``sessions`` concurrent koe turns; returns the level's figures and every session's trace."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:
        before = await _synthesis_totals(http)
        started = time.monotonic()
        traces = await asyncio.gather(*(koe_turn(base_url, answer, pace, voice) for _ in range(sessions)))
        wall = time.monotonic() - started
        after = await _synthesis_totals(http)
    rtf = None
    if before is not None and after is not None and after[1] > before[1]:
        rtf = (after[0] - before[0]) / (after[1] - before[1])
    first = summarize([t.first_audio_s - (t.first_sentence_at or 0.0) for t in traces])
    playbacks = [t.playback for t in traces]
    gaps = sum(p.gap_count for p in playbacks)
    audio = sum(c.duration_s for t in traces for c in t.chunks)
    if audio <= 0:
        raise UpstreamError(f"{sessions} sessions produced no audio")
    level = Level(
        sessions,
        first,
        gaps,
        sum(p.gap_total_s for p in playbacks),
        rtf,
        audio / wall,
        ok=gaps == 0 and worst_case(first) <= threshold_s,
    )
    return level, list(traces)


def levels(max_sessions: int) -> list[int]:
    """1, 2, 4, … up to ``max_sessions`` (which is included even when it is not a power of two)."""
    counts = [1]
    while counts[-1] * 2 <= max_sessions:
        counts.append(counts[-1] * 2)
    if counts[-1] != max_sessions:
        counts.append(max_sessions)
    return counts
