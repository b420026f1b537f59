"""``koe bench --engine torch``: how many streamed agent answers one device serves, batching on and off.

The torch engine (weights as ``koe install --engine torch`` left them) is loaded once, on ``--device``,
and served twice in this process: with whole segments of all sessions sharing engine calls, and with one
call per segment. Each mode climbs a ladder of concurrent sessions, every session streaming the agent
answer at the LLM pace (:func:`koe_bench.capacity.run_level`). A level passes when no listener hears an
underrun and the p95 (from 20 sessions, else the slowest) first audio after the answer's first sentence
is within the threshold (300 ms); a mode stops at its first failing level. Reported per mode: each level,
the largest passing one, its audio-seconds per second and the share of a CPU core each of its sessions
took (:func:`cores_per_session`); the calls' sizes and latency by size (from the
server's ``/metrics``) and the pass shapes they ran; device memory. Before the ladders (the short steps
first), the engine alone: audio-seconds per second of ``synthesize_batch`` at growing batch sizes, the
ceiling the ladder approaches. Where the engine pads its passes to buckets (on CUDA), the same engine
without buckets (a twin on the same weights) is measured beside it: the throughput, and each piece of the
answer alone twice, where a first call at a shape the device has not met pays its one-off cost.
``KOE_TORCH_BUCKETS=0`` loads the engine without buckets: the ladders run on it, and there is no twin.
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from koe.agent.replay import ReplayPace
from koe.engine.base import SynthesisRequest
from koe.errors import ConfigError
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench import capacity
from koe_bench.config import ANSWER, QUICK_ANSWER, VOICE
from koe_bench.engine import rss_mb
from koe_bench.target import in_process_server
from koe_bench.usage import Meter

SCHEMA = "koe-bench-gpu/1"
#: The issue's pass rule: first audio after the first sentence within 300 ms, no underrun.
THRESHOLD_S = 0.3
LADDER = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128)
QUICK_LADDER = (1, 2)
BATCH_SIZES = (1, 4, 16, 32, 64)
QUICK_BATCH_SIZES = (1, 2)
#: Segments per shared call when batching is on (the engine's passes are as wide).
BATCHED_SEGMENTS = 64
MODES = {"batched": BATCHED_SEGMENTS, "unbatched": 1}
_BYTES_PER_MB = 1024 * 1024

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GpuBenchConfig:
    """One run: the device, the ladder, the answer and its pace, the pass threshold."""

    out: Path
    device: str = "cuda"
    ladder: tuple[int, ...] = LADDER
    rounds: int = 2
    answer: str = ANSWER
    pace: ReplayPace = field(default_factory=ReplayPace)
    voice: str = VOICE
    threshold_s: float = THRESHOLD_S
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    quick: bool = False

    def __post_init__(self) -> None:
        if not self.ladder or min(self.ladder) < 1 or list(self.ladder) != sorted(set(self.ladder)):
            raise ConfigError(f"bench ladder: expected rising session counts >= 1, got {list(self.ladder)}")
        if self.rounds < 1 or not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ConfigError("bench rounds and batch sizes: expected integers >= 1")

    @classmethod
    def for_run(
        cls, out: Path, device: str, *, quick: bool, max_sessions: int | None = None
    ) -> GpuBenchConfig:
        """Full or quick defaults; ``max_sessions`` cuts the ladder (and is its last rung)."""
        config = cls(out, device)
        if quick:
            config = replace(config, ladder=QUICK_LADDER, rounds=1, answer=QUICK_ANSWER,
                             batch_sizes=QUICK_BATCH_SIZES, quick=True)  # fmt: skip
        if max_sessions is not None:
            config = replace(config, ladder=cut_ladder(config.ladder, max_sessions))
        return config


def cut_ladder(ladder: tuple[int, ...], max_sessions: int) -> tuple[int, ...]:
    """``ladder`` ended at ``max_sessions`` (its last rung).

    Raises:
        ConfigError: ``max_sessions`` < 1.
    """
    if max_sessions < 1:
        raise ConfigError(f"--max-sessions: expected an integer >= 1, got {max_sessions}")
    return (*(n for n in ladder if n < max_sessions), max_sessions)


def load(config: GpuBenchConfig) -> tuple[Speech, Settings]:
    """The torch engine on the configured device, as ``koe serve`` would load it (``KOE_*`` respected)."""
    settings = Settings.from_env(
        port=0, engine="torch", device=config.device, batch_max_segments=BATCHED_SEGMENTS
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=False))
    return speech, settings


def run(
    config: GpuBenchConfig,
    speech: Speech,
    settings: Settings,
    command: str,
    checkpoint: Callable[[dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """The engine alone, then both ladders; the JSON-ready report. ``checkpoint`` is handed the report so
    far after each step (on a lent GPU a run cut short by its time limit still leaves what it measured: the
    short step goes first)."""
    started = time.monotonic()
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "command": command,
        "quick": config.quick,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(config, speech),
        "config": {
            "threshold_s": config.threshold_s,
            "ladder": list(config.ladder),
            "rounds": config.rounds,
            "answer_words": len(config.answer.split()),
            "tokens_per_s": config.pace.tokens_per_s,
            "first_token_delay_s": config.pace.first_token_delay_s,
            "voice": config.voice,
            "workers": settings.layout.workers,
            "batch_window_s": settings.batch_window_s,
        },
        "modes": {},
    }
    twin = _without_buckets(speech)
    report["shapes"] = _shapes(speech)
    if twin is not None:
        report["first_calls"] = {
            "buckets": _first_calls(config, speech),
            "no buckets": _first_calls(config, twin),
        }
    report["engine"] = _throughput(config, speech)
    if twin is not None:
        report["engine_without_buckets"] = _throughput(config, twin)
    report["ladder_engine"] = speech.engine.description
    for mode, segments in MODES.items():
        if checkpoint is not None:
            checkpoint({**report, "elapsed_s": time.monotonic() - started})
        mode_settings = replace(settings, batch_max_segments=segments)
        report["modes"][mode] = asyncio.run(_ladder(config, speech, mode_settings))
    report["elapsed_s"] = time.monotonic() - started
    return report


def _without_buckets(speech: Speech) -> Speech | None:
    """``speech`` on a twin of its torch engine that pads nothing (same weights, no second copy); None
    where the engine pads nothing already."""
    from koe.engine.torch import TorchEngine

    engine = speech.engine
    if not isinstance(engine, TorchEngine) or engine.buckets is None:
        return None
    return speech.with_engine(
        engine.sharing(replace(engine.options, buckets=False, warm=False, graphs=False))
    )


def _shapes(speech: Speech) -> dict[str, Any]:
    """What the torch engine pads to, what it warmed and how long that took, which shapes replay a CUDA
    graph (nulls where it pads nothing)."""
    from koe.engine.torch import TorchEngine

    engine = speech.engine
    if not isinstance(engine, TorchEngine) or engine.buckets is None:
        return {"buckets": None, "warm_s": None, "warmed": 0, "graph_shapes": []}
    return {
        "buckets": asdict(engine.buckets),
        "warm_s": engine.warm_s,
        "warmed": len(engine.warmed),
        "graph_shapes": [list(shape) for shape in engine.graph_shapes],
    }


def _passes(speech: Speech) -> dict[tuple[str, int, int], int]:
    from koe.engine.torch import TorchEngine

    return speech.engine.pass_shapes() if isinstance(speech.engine, TorchEngine) else {}


def _passes_between(
    before: dict[tuple[str, int, int], int], after: dict[tuple[str, int, int], int]
) -> list[dict[str, Any]]:
    """The passes run in between, by shape: which buckets a ladder used."""
    return [
        {"pass": kind, "rows": rows, "width": width, "count": count - before.get((kind, rows, width), 0)}
        for (kind, rows, width), count in sorted(after.items())
        if count > before.get((kind, rows, width), 0)
    ]


async def _ladder(config: GpuBenchConfig, speech: Speech, settings: Settings) -> dict[str, Any]:
    levels: list[dict[str, Any]] = []
    memory: dict[str, float | None]
    passes = _passes(speech)
    with _device_memory() as memory, in_process_server(settings, speech) as url:
        for sessions in config.ladder:
            before = await asyncio.to_thread(_calls, url)
            meter = Meter()
            level, _ = await capacity.run_level(
                url, sessions, config.answer, config.pace, config.voice, config.threshold_s, config.rounds
            )
            usage = capacity.level_usage(level, meter.stop(), None)
            after = await asyncio.to_thread(_calls, url)
            levels.append(
                {
                    **asdict(level),
                    "usage": asdict(usage),
                    "cpu_cores_per_session": cores_per_session(level, usage),
                    "calls": _calls_between(before, after),
                }
            )
            if not level.ok:
                break
    passing = [lv for lv in levels if lv["ok"]]
    best = passing[-1] if passing else None
    return {
        "batch_max_segments": settings.batch_max_segments,
        "passes": _passes_between(passes, _passes(speech)),
        "levels": levels,
        "max_sessions_ok": best["sessions"] if best else None,
        "audio_per_wall_s_at_max_ok": best["audio_per_wall_s"] if best else None,
        "cpu_cores_per_session_at_max_ok": best["cpu_cores_per_session"] if best else None,
        "memory_mb": memory,
    }


def cores_per_session(level: capacity.Level, usage: capacity.LevelUsage) -> float:
    """How much of a CPU core each session of ``level`` kept busy in this process (the server: G2P, text,
    scheduling, encoding, and the host side of the device's passes), the clients' thread left out: what
    the host must have per session beside the device."""
    wall_s = level.audio_s / level.audio_per_wall_s
    return (usage.cpu_s - usage.client_cpu_s) / wall_s / level.sessions


def _calls(url: str) -> dict[str, tuple[float, float]]:
    """Engine calls so far by batch size: (count, seconds), from ``/metrics``."""
    text = httpx.get(url + "/metrics", timeout=30.0).text
    calls: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("koe_engine_call_seconds_count", "koe_engine_call_seconds_sum"):
                entry = calls.setdefault(sample.labels["batch_size"], [0.0, 0.0])
                entry[0 if sample.name.endswith("_count") else 1] = sample.value
    return {size: (count, total) for size, (count, total) in calls.items()}


def _calls_between(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, Any]:
    """The calls one level made: how many of each size and their mean latency; the mean size."""
    by_size: dict[str, dict[str, float]] = {}
    for size, (count, total) in after.items():
        old_count, old_total = before.get(size, (0.0, 0.0))
        if count > old_count:
            by_size[size] = {"calls": count - old_count, "mean_s": (total - old_total) / (count - old_count)}
    calls = sum(v["calls"] for v in by_size.values())
    segments = sum(int(size) * v["calls"] for size, v in by_size.items())
    return {"by_size": by_size, "calls": calls, "mean_size": segments / calls if calls else None}


def _throughput(config: GpuBenchConfig, speech: Speech) -> list[dict[str, float]]:
    """Audio-seconds per second of the engine alone, one call of each batch size (after one warm call)."""
    pieces = speech.phonemize_words(config.answer)
    style = speech.voices.resolve(config.voice)
    rows: list[dict[str, float]] = []
    for size in config.batch_sizes:
        requests = [SynthesisRequest(pieces[i % len(pieces)].phonemes, style) for i in range(size)]
        speech.engine.synthesize_batch(requests[:1])
        started = time.perf_counter()
        results = speech.engine.synthesize_batch(requests)
        wall = time.perf_counter() - started
        audio_s = sum(u.audio.size for u in results) / speech.sample_rate
        rows.append({"batch": size, "wall_s": wall, "audio_s": audio_s, "audio_per_wall_s": audio_s / wall})
    return rows


def _first_calls(config: GpuBenchConfig, speech: Speech) -> dict[str, Any]:
    """Each piece of the answer alone, twice in a row: the first call's extra seconds over the second are
    what a shape the device had not met cost (none where every shape was warmed)."""
    style = speech.voices.resolve(config.voice)
    extra: list[float] = []
    for piece in speech.phonemize_words(config.answer):
        request = [SynthesisRequest(piece.phonemes, style)]
        walls = []
        for _ in range(2):
            started = time.perf_counter()
            speech.engine.synthesize_batch(request)
            walls.append(time.perf_counter() - started)
        extra.append(walls[0] - walls[1])
    return {
        "pieces": len(extra),
        "extra_s_median": median(extra),
        "extra_s_max": max(extra),
        "extra_s": extra,
    }


@contextmanager
def _device_memory() -> Iterator[dict[str, float | None]]:
    """Peak device memory (CUDA) or the process's resident memory (CPU) over the block, in MB."""
    import torch

    found: dict[str, float | None] = {"cuda_peak_allocated": None, "cuda_peak_reserved": None}
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        yield found
    finally:
        if cuda:
            found["cuda_peak_allocated"] = torch.cuda.max_memory_allocated() / _BYTES_PER_MB
            found["cuda_peak_reserved"] = torch.cuda.max_memory_reserved() / _BYTES_PER_MB
        found.update({f"rss_{key}": value for key, value in rss_mb().items()})


def _machine(config: GpuBenchConfig, speech: Speech) -> dict[str, Any]:
    import os

    import torch

    from koe.engine.torch import TorchEngine

    engine = speech.engine
    cuda = torch.cuda.is_available()
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": config.device,
        "engine": speech.engine.description,
        "dtype": engine.options.dtype if isinstance(engine, TorchEngine) else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_memory_mb": torch.cuda.get_device_properties(0).total_memory / _BYTES_PER_MB if cuda else None,
    }


def write(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """``bench-torch-<device>.json`` and its plot into ``out``; without matplotlib (the GPU kit does not
    carry it: 26 MB of wheels) the JSON alone, and :func:`plot` draws the PNG from it elsewhere."""
    out.mkdir(parents=True, exist_ok=True)
    stem = "bench-torch-" + report["machine"]["device"].replace(":", "")
    paths = {"json": out / f"{stem}.json"}
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        logger.warning(
            "matplotlib is not installed: no plot (python -m koe_bench.gpu %s draws it)", paths["json"]
        )
        report = {**report, "plot": None}
    else:
        paths["plot"] = out / f"{stem}.png"
        report = {**report, "plot": paths["plot"].name}
        plot(report, paths["plot"])
    paths["json"].write_text(json.dumps(report, indent=2) + "\n")
    return paths


def plot(report: dict[str, Any], path: Path) -> None:
    """The report's ladders as a PNG: p95 first audio and audio-seconds per second by sessions."""
    from matplotlib.figure import Figure

    threshold = report["config"]["threshold_s"]
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    latency, throughput = fig.subplots(1, 2)
    for mode, result in report["modes"].items():
        levels: Sequence[dict[str, Any]] = result["levels"]
        sessions = [lv["sessions"] for lv in levels]
        worst = [lv["first_audio_after_sentence_s"]["p95"] or lv["first_audio_after_sentence_s"]["max"]
                 for lv in levels]  # fmt: skip
        latency.plot(sessions, worst, "o-", label=mode)
        throughput.plot(sessions, [lv["audio_per_wall_s"] for lv in levels], "o-", label=mode)
    latency.axhline(
        threshold, color="tab:red", linestyle="--", linewidth=1, label=f"{threshold * 1000:.0f} ms"
    )
    latency.set(xlabel="concurrent sessions", ylabel="p95 first audio after 1st sentence (s)", yscale="log")
    throughput.set(xlabel="concurrent sessions", ylabel="audio-seconds per second")
    for ax in (latency, throughput):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    machine = report["machine"]
    fig.suptitle(f"koe: {machine['engine']}, {machine['gpu'] or machine['platform']}", fontsize=10)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":  # python -m koe_bench.gpu REPORT.json: the plot the GPU machine could not draw
    import sys

    source = Path(sys.argv[1])
    plot(json.loads(source.read_text()), source.with_suffix(".png"))
