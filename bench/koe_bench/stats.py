"""The arithmetic of the benchmarks, without I/O: summaries, a simulated listener, a straight-line fit.

The listener is what turns arrival times into what a user hears: it starts playing at the first audio and
plays every chunk in order as soon as both the chunk and the speaker are free; whenever the next chunk is
not there yet, the speaker falls silent (an underrun) until it arrives.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: p95 is reported only from this many samples on; below it the 95th percentile is just the maximum.
MIN_SAMPLES_FOR_P95 = 20
#: Underruns shorter than this are timer and transport noise between frames of one segment, not silence
#: anyone hears (a 24 kHz frame of 100 ms is 4800 samples; 5 ms is what a jitter buffer absorbs).
MIN_GAP_S = 0.005


@dataclass(frozen=True, slots=True)
class Summary:
    """Median (and p95 where there are enough samples) of one measurement over repeated runs."""

    n: int
    median: float
    p95: float | None
    min: float
    max: float


def summarize(values: Sequence[float]) -> Summary:
    """Summarize ``values``.

    Raises:
        ValueError: ``values`` is empty (there is nothing to report; the caller must not invent a number).
    """
    if not values:
        raise ValueError("expected at least one sample, got none")
    p95 = (
        statistics.quantiles(values, n=20, method="inclusive")[18]
        if len(values) >= MIN_SAMPLES_FOR_P95
        else None
    )
    return Summary(len(values), statistics.median(values), p95, min(values), max(values))


def summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric field of ``runs`` as a summary (fields that are ``None`` in every run are left out)."""
    out: dict[str, Any] = {}
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        if values:
            out[key] = asdict(summarize(values))
    return out


def worst_case(summary: Summary) -> float:
    """p95 where it is reported, else the maximum: the stricter figure for a pass/fail threshold."""
    return summary.p95 if summary.p95 is not None else summary.max


#: A sample this loud (−40 dBFS) is speech: a segment's lead-in stays below −80 dBFS until a few frames
#: before the voice starts, so "first speech" is not thrown by the lead-in's noise floor.
SPEECH_LEVEL = 10 ** (-40 / 20)


def onset_s(samples: np.ndarray, sample_rate: int) -> float | None:
    """Seconds into mono ``samples`` (full scale ±1) of the first sample of speech (``None``: silent)."""
    loud = np.flatnonzero(np.abs(samples) >= SPEECH_LEVEL)
    return float(loud[0]) / sample_rate if loud.size else None


@dataclass(frozen=True, slots=True)
class Chunk:
    """Audio that became available to the listener at ``at`` seconds, lasting ``duration_s``; its speech
    starts ``onset_s`` into it (``None``: silent, or not known)."""

    at: float
    duration_s: float
    onset_s: float | None = None


@dataclass(frozen=True, slots=True)
class Playback:
    """What the simulated listener heard: spans of sound and spans of silence after the first audio."""

    starts_at: float | None
    ends_at: float | None
    played: tuple[tuple[float, float], ...]
    gaps: tuple[tuple[float, float], ...]
    #: when the listener first hears speech, not the silence before it (``None``: no chunk says)
    first_speech_at: float | None = None

    @property
    def heard_gaps(self) -> tuple[tuple[float, float], ...]:
        """The underruns after the first speech: a wait while only the lead-in's silence has played
        sounds like a later start, which :attr:`first_speech_at` already counts. All of them when no
        chunk says where speech starts."""
        if self.first_speech_at is None:
            return self.gaps
        return tuple(gap for gap in self.gaps if gap[0] >= self.first_speech_at)

    @property
    def gap_count(self) -> int:
        return len(self.heard_gaps)

    @property
    def gap_total_s(self) -> float:
        return sum(end - start for start, end in self.heard_gaps)

    @property
    def max_gap_s(self) -> float:
        return max((end - start for start, end in self.heard_gaps), default=0.0)


def simulate_playback(chunks: Iterable[Chunk], min_gap_s: float = MIN_GAP_S) -> Playback:
    """Play ``chunks`` in arrival order from the first one on; underruns of ``min_gap_s`` or more count.

    Chunks of zero length are ignored. Adjacent sound spans are merged, so ``played`` alternates with
    ``gaps``.
    """
    played: list[tuple[float, float]] = []
    gaps: list[tuple[float, float]] = []
    cursor: float | None = None  # when the speaker finishes what it has been given so far
    first_speech: float | None = None
    for chunk in sorted((c for c in chunks if c.duration_s > 0), key=lambda c: c.at):
        if cursor is None:
            cursor = chunk.at
        elif chunk.at - cursor >= min_gap_s:
            gaps.append((cursor, chunk.at))
            cursor = chunk.at
        else:
            cursor = max(cursor, chunk.at)
        start, cursor = cursor, cursor + chunk.duration_s
        if first_speech is None and chunk.onset_s is not None:
            first_speech = start + chunk.onset_s
        if played and played[-1][1] >= start:
            played[-1] = (played[-1][0], cursor)
        else:
            played.append((start, cursor))
    return Playback(played[0][0] if played else None, cursor, tuple(played), tuple(gaps), first_speech)


@dataclass(frozen=True, slots=True)
class LineFit:
    """``y ≈ intercept + slope · x`` by least squares, and how well it fits (R²)."""

    intercept: float
    slope: float
    r2: float


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit:
    """Least-squares line through ``(xs, ys)``.

    Raises:
        ValueError: fewer than two distinct ``xs`` (no line is determined) or lengths differ.
    """
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(
            f"expected ≥ 2 distinct x values and as many y values, got {len(set(xs))} and {len(ys)}"
        )
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (intercept + slope * x)) ** 2))
    spread = float(np.sum((y - y.mean()) ** 2))
    return LineFit(float(intercept), float(slope), 1.0 - residual / spread if spread > 0 else 1.0)
