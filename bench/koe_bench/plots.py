"""The benchmark's two pictures (matplotlib, no display needed): one agent turn per strategy, and capacity.

The timeline has one panel per strategy on a shared time axis, four lanes each: when the answer's tokens
arrived, when each segment (or message) was synthesized, when audio reached the client, and what the
simulated listener heard — green while it plays, red where it falls silent waiting for audio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from koe_bench.turns import TurnTrace

_LANES = ("listener", "audio received", "synthesized", "text arrives")
_LABELS = {
    "batch": "batch (whole answer, then synthesize)",
    "aws_sample": "AWS sample (one message per sentence)",
    "koe": "koe (append per token + flush)",
    "koe_windowed": "koe, windowed decoding (opt-in)",
}
_DPI = 110


def timeline(traces: Mapping[str, TurnTrace], path: Path) -> Path:
    """Draw one turn per strategy to ``path`` (PNG) and return it."""
    fig = Figure(figsize=(11, 1.9 * len(traces) + 0.6), layout="constrained")
    axes = fig.subplots(len(traces), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (name, trace) in zip(axes, traces.items(), strict=True):
        playback = trace.playback
        ax.vlines(trace.tokens, 2.7, 3.3, color="0.45", linewidth=0.6)
        ax.plot(trace.segments, [2] * len(trace.segments), "v", color="tab:purple", markersize=6)
        ax.vlines([c.at for c in trace.chunks], 0.7, 1.3, color="tab:blue", linewidth=0.8)
        ax.broken_barh([(a, b - a) for a, b in playback.played], (-0.3, 0.6), color="tab:green")
        ax.broken_barh([(a, b - a) for a, b in playback.heard_gaps], (-0.3, 0.6), color="tab:red")
        if trace.first_sentence_at is not None and trace.tokens:
            ax.axvline(trace.first_sentence_at, color="0.3", linestyle=":", linewidth=1)
        first = trace.first_audio_s
        ax.axvline(first, color="tab:green", linestyle="--", linewidth=1)
        ax.set_title(
            f"{_LABELS.get(name, name)} — first audio {first:.2f} s, "
            f"{playback.gap_count} gaps ({playback.gap_total_s:.2f} s silent)",
            fontsize=9,
            loc="left",
        )
        ax.set_yticks(range(len(_LANES)), _LANES, fontsize=8)
        ax.set_ylim(-0.6, 3.6)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("seconds since the request (dotted: first sentence complete; dashed: first audio)")
    fig.savefig(path, dpi=_DPI)
    return path


def capacity(levels: Sequence[Mapping[str, Any]], threshold_s: float, path: Path) -> Path:
    """Draw first audio, silence and RTF against the number of sessions to ``path`` (PNG)."""
    sessions = [lv["sessions"] for lv in levels]
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    first = [lv["first_audio_after_sentence_s"] for lv in levels]
    left.plot(sessions, [f["median"] for f in first], "o-", label="median")
    left.plot(
        sessions, [f["p95"] if f["p95"] is not None else f["max"] for f in first], "s--", label="p95 / max"
    )
    left.axhline(threshold_s, color="tab:red", linestyle=":", label=f"threshold {threshold_s:g} s")
    left.set_ylim(bottom=0)
    left.set_xlabel("concurrent sessions")
    left.set_ylabel("first sentence → first audio (s)")
    left.legend(fontsize=8)
    right.bar(sessions, [lv["gap_total_s"] for lv in levels], color="tab:red", alpha=0.6, label="silence (s)")
    right.set_xlabel("concurrent sessions")
    right.set_ylabel("total silence after first audio (s)")
    twin = right.twinx()
    rtf = [(n, lv["rtf"]) for n, lv in zip(sessions, levels, strict=True) if lv["rtf"] is not None]
    twin.plot([n for n, _ in rtf], [r for _, r in rtf], "o-", color="tab:blue", label="RTF")
    twin.axhline(1.0, color="tab:blue", linestyle=":", linewidth=1)
    twin.set_ylabel("RTF under load (synthesis / audio)")
    for ax in (left, right):
        ax.set_xticks(sessions)
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=_DPI)
    return path
