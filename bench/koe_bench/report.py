"""The benchmark's outputs: tables on stdout, and ``bench.json``, ``bench.md`` and the PNG plots on disk.

The tables are built once as plain rows (:func:`sections`) and rendered twice: with Rich for the terminal
and as Markdown for ``docs/benchmarks.md``, so the two never disagree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from koe_bench import coldstart, firstaudio, languages, openers, plots
from koe_bench.tables import MISSING, gaps, seconds
from koe_bench.turns import TurnTrace

JSON_NAME = "bench.json"
MARKDOWN_NAME = "bench.md"
READING_JSON_NAME = "reading.json"
READING_MARKDOWN_NAME = "reading.md"
TIMELINE_NAME = "bench-timeline.png"
CAPACITY_NAME = "bench-capacity.png"
_STRATEGY_COLUMNS = (
    "strategy", "first audio s", "after 1st sentence s", "total s", "gaps", "silence s", "max gap s",
)  # fmt: skip


@dataclass
class Section:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: Scenarios a run may leave out (against a remote server, or quick), and their tables.
_OPTIONAL = {"openers": openers.table, "cold_start": coldstart.table}


def write(report: dict[str, Any], traces: Mapping[str, TurnTrace], out: Path) -> dict[str, Path]:
    """Draw the plots, write the JSON (which names them) and the Markdown tables into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    capacity = report["scenarios"]["capacity"]
    paths = {
        "timeline": plots.timeline(traces, out / TIMELINE_NAME),
        "capacity": plots.capacity(capacity["levels"], capacity["threshold_s"], out / CAPACITY_NAME),
    }
    report["plots"] = {name: path.name for name, path in paths.items()}
    paths["json"] = out / JSON_NAME
    paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    paths["markdown"] = out / MARKDOWN_NAME
    paths["markdown"].write_text(markdown(report))
    return paths


def sections(report: Mapping[str, Any]) -> list[Section]:
    """Every scenario as a table, then the targets, as plain strings."""
    scenarios = report["scenarios"]
    ratios = scenarios["agent"]["ratios"]
    agent = _strategies(scenarios["agent"]["strategies"], "1 · agent answer, streamed (medians)")
    agent.notes.append(
        f"first audio: batch / koe = {ratios['batch_over_koe_first_audio']:.1f}×, "
        f"AWS sample / koe = {ratios['aws_sample_over_koe_first_audio']:.1f}×"
    )
    if "koe_over_koe_windowed_first_audio" in ratios:
        agent.notes.append(
            f"koe / koe windowed = {ratios['koe_over_koe_windowed_first_audio']:.1f}× (windowed decoding is "
            "opt-in beyond a turn's first segment: it misses the spectral-balance gate, docs/engine.md)"
        )
    peer = _strategies(
        scenarios["peer"]["strategies"],
        f"2 · peer library, whole text at once: {scenarios['peer']['library']} vs koe (medians)",
    )
    extra = [Section(*languages.table(scenarios["languages"]))] if "languages" in scenarios else []
    if "first_audio" in scenarios:
        extra.append(Section(*firstaudio.table(scenarios["first_audio"])))
    return [
        agent,
        peer,
        _barge_in(scenarios["barge_in"]),
        capacity_section(scenarios["capacity"]),
        reading_section(scenarios["reading"]),
        *extra,
        _engine(report),
        *([_engine_cpu(scenarios["engine"]["cpu"])] if "cpu" in scenarios["engine"] else []),
        *[Section(*table(scenarios[name])) for name, table in _OPTIONAL.items() if name in scenarios],
        _targets(report),
    ]


def _strategies(strategies: Mapping[str, Any], title: str) -> Section:
    section = Section(title, _STRATEGY_COLUMNS)
    for name, row in strategies.items():
        section.rows.append(
            (
                name,
                seconds(row["first_audio_s"]),
                seconds(row.get("first_audio_after_sentence_s")),
                seconds(row["total_s"]),
                f"{row['gap_count']['median']:g}",
                seconds(row["gap_total_s"]),
                seconds(row["max_gap_s"]),
            )
        )
    return section


def _barge_in(barge: Mapping[str, Any]) -> Section:
    section = Section(f"3 · barge-in ({len(barge['runs'])} cancels)", ("", "median ms", "p95 ms", "max ms"))
    for key, label in (
        ("cancel_to_cancelled_s", "cancel → cancelled"),
        ("cancel_to_last_audio_s", "cancel → last audio frame"),
        ("unplayed_at_cancel_s", "unplayed audio held at cancel (the player drops it)"),
    ):
        if key in barge:  # results written before the unplayed audio was measured lack it
            section.rows.append((label, *(_ms(barge[key][k]) for k in ("median", "p95", "max"))))
    section.notes.append(f"audio frames after `cancelled`: {barge['audio_after_cancelled']}")
    return section


def capacity_section(capacity: Mapping[str, Any]) -> Section:
    """The capacity ladder (``koe-bench-capacity/3``): a row per level, then the largest smooth load, what a
    listener-hour costs there, the memory the ladder started from and any busy neighbour."""
    hog = capacity["hog"]
    section = Section(
        f"4 · capacity (threshold {capacity['threshold_s']:g} s on first sentence → first audio; a level "
        f"passes when most of its rounds do; {hog or 'no'} busy neighbour process{'' if hog == 1 else 'es'})",
        (
            "sessions",
            "first audio after sentence, median s",
            "p95 or max s",
            "gaps per listener (max)",
            "silence per listener s (max)",
            "RTF",
            "audio s per s",
            "audio s per server CPU s (client CPU s)",
            "peak RSS MB (× start)",
            "refused (by code)",
            "rounds ok",
        ),
    )
    for level in capacity["levels"]:
        usage = level["usage"]
        silence = level["silence_per_listener_s"]
        section.rows.append(
            (
                str(level["sessions"]),
                seconds(level["first_audio_after_sentence_s"]),
                f"{level['first_audio_after_sentence_worst_s']:.2f} ({level['worst_is']})",
                gaps(level["gaps_per_listener"]),
                f"{silence['median']:.2f} ({silence['max']:.2f})",
                _fixed(level["rtf"]),
                f"{level['audio_per_wall_s']:.2f}",
                MISSING
                if usage is None
                else f"{_fixed(usage['audio_per_cpu_s'])} ({usage['client_cpu_s']:.2f})",
                MISSING
                if usage is None or usage["rss_peak_mb"] is None
                else f"{usage['rss_peak_mb']:.0f} ({_fixed(usage['rss_peak_over_start'])}×)",
                _refused(level.get("refused")),
                f"{level['rounds_ok']}/{level['rounds']} {'yes' if level['ok'] else 'no'}",
            )
        )
    best = capacity["max_sessions_ok"]
    section.notes.append(
        f"largest smooth load: {best} sessions" if best else "no level tried was smooth and prompt"
    )
    cost = capacity["listener_hour"]
    if cost is not None:
        used = (
            ""
            if cost["used_usd"] is None
            else f", ${cost['used_usd']:.4f} used ({cost['used_vcpu_h']:.2f} vCPU-h of work)"
        )
        section.notes.append(
            f"{cost['listeners_per_core']:.2f} listeners per core ({capacity['usable_cores']} cores); a "
            f"listener-hour at ${cost['vcpu_price_usd']:g} per vCPU-hour: ${cost['provisioned_usd']:.4f} "
            f"provisioned ({cost['provisioned_vcpu_h']:.2f} vCPU-h){used}"
        )
    if capacity["rss_start_mb"] is not None:
        section.notes.append(
            f"RSS when the ladder started: {_mb(capacity['rss_start_mb'])} MB (peak before it "
            f"{_mb(capacity['rss_peak_before_mb'])} MB)"
        )
    return section


def reading_section(reading: Mapping[str, Any]) -> Section:
    """The reading corpus: pass rate per group and overall, against the targets."""
    targets = reading["targets"]
    section = Section(
        f"6 · reading: LLM-style English heard by the ASR (targets {targets['overall']:.0%} overall, "
        f"{targets['group']:.0%} per group)",
        ("group", "passed", "texts", "pass rate"),
    )
    rows = [*reading["groups"].items(), ("overall", reading["overall"])]
    for name, rate in rows:
        section.rows.append((name, str(rate["passed"]), str(rate["texts"]), f"{rate['rate']:.0%}"))
    section.notes.append(f"targets met: {'yes' if reading['met'] else 'NO'}; ASR: {reading['asr']}")
    section.notes += [
        f"not as expected: `{r['text']!r}` heard as “{r['transcript']}”"
        for r in reading["results"]
        if not r["passed"]
    ]
    return section


def write_reading(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """``koe bench --only reading``: its JSON and its table in Markdown, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / READING_JSON_NAME, "markdown": out / READING_MARKDOWN_NAME}
    paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    paths["markdown"].write_text(_markdown([reading_section(report["reading"])]))
    return paths


def _engine(report: Mapping[str, Any]) -> Section:
    section = Section(
        "5 · engine: synthesis time vs phoneme tokens",
        ("engine", "intercept ms", "ms per token", "R²", "RTF at the longest"),
    )
    for name, fit in report["scenarios"]["engine"]["engines"].items():
        section.rows.append(
            (
                name,
                f"{fit['intercept_s'] * 1000:.0f}",
                f"{fit['slope_ms_per_token']:.2f}",
                f"{fit['r2']:.3f}",
                f"{fit['points'][-1]['rtf']:.2f}",
            )
        )
    section.notes.append(
        "RSS MB, now / peak: "
        + ", ".join(f"{k} {_mb(v['now'])} / {_mb(v['peak'])}" for k, v in report["rss_mb"].items())
    )
    return section


def _engine_cpu(cpu: Mapping[str, Any]) -> Section:
    """CPU per call on one text: what a listener costs on a shared machine, not how soon it hears."""
    section = Section(
        f"5 · engine: CPU per call on a {cpu['words']}-word text ({cpu['tokens']} tokens, medians)",
        ("engine", "audio s", "CPU s", "wall s", "audio s per CPU s"),
    )
    for name, cost in cpu["engines"].items():
        section.rows.append(
            (
                name,
                f"{cost['audio_s']:.2f}",
                f"{cost['cpu_s']:.2f}",
                f"{cost['wall_s']:.2f}",
                f"{cost['audio_per_cpu_s']:.2f}",
            )
        )
    section.notes.append(
        "CPU: this process's, every thread, user and system, each engine as its product sets it up"
    )
    return section


def _targets(report: Mapping[str, Any]) -> Section:
    section = Section("targets (this machine)", ("target", "wanted", "measured", "met"))
    for name, target in report["targets"].items():
        section.rows.append(
            (name, f"{target['target']:g}", f"{target['measured']:.3g}", "yes" if target["met"] else "NO")
        )
    machine = report["machine"]
    section.notes.append(
        f"`{report['command']}`: {machine['cpus']} CPUs, 1-minute load {machine['load_avg_1m']:.1f} at the "
        f"start, {machine['load_avg_1m_end']:.1f} at the end; {report['elapsed_s']:.0f} s"
    )
    return section


def print_tables(report: Mapping[str, Any], console: Console) -> None:
    print_sections(sections(report), console)


def print_sections(tables: list[Section], console: Console) -> None:
    for section in tables:
        table = Table(*section.columns, title=section.title)
        for row in section.rows:
            table.add_row(*row)
        console.print(table)
        for note in section.notes:
            console.print(note)


def markdown(report: Mapping[str, Any]) -> str:
    """The same tables in Markdown, ready for ``docs/benchmarks.md``."""
    return _markdown(sections(report))


def _markdown(tables: list[Section]) -> str:
    lines: list[str] = []
    for section in tables:
        lines += [f"**{section.title}**", "", "| " + " | ".join(section.columns) + " |"]
        lines.append("|" + "---|" * len(section.columns))
        lines += ["| " + " | ".join(row) + " |" for row in section.rows]
        lines += ["", *(f"{note}  " for note in section.notes), ""]
    return "\n".join(lines)


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def _refused(refused: Mapping[str, int] | None) -> str:
    """Listeners refused, by code (``2 over_capacity``); a report written before refusals were counted:
    the missing mark."""
    if refused is None:
        return MISSING
    return ", ".join(f"{count} {code}" for code, count in sorted(refused.items())) or "0"


def _fixed(value: float | None, places: int = 2) -> str:
    return MISSING if value is None else f"{value:.{places}f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.0f}"
