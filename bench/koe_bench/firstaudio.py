"""First audio for every kind of input: koe against the Kokoro servers a user would pick instead.

Four scenarios, one voice, the same model bytes for everyone: a sentence sent whole whose first clause is
one word, a four-sentence answer sent whole, the same answer streamed by the simulated LLM, and two such
streamed answers at once (2 cores shared). A peer that cannot take streamed text is asked when the LLM has
finished, which is what its user must do. koe is measured twice in the same run: as configured (a turn's
first segment windowed) and with ``windowed_first`` off (the behaviour before), over WebSocket and, for
whole texts, over ``POST /invocations``. Every figure is on the client's clock from the moment the turn
starts; "first speech" is when the listener hears the voice, not the silence before it.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from koe.agent.replay import ReplayPace
from koe.engine.assets import locate
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench import fastkokoro, peer
from koe_bench.config import BenchConfig
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import summarize_runs
from koe_bench.tables import gaps, seconds, strategy_rows
from koe_bench.target import bench_settings, in_process_server
from koe_bench.turns import Clock, TurnTrace, koe_turn, stream_answer, streamed_pcm_turn

SCHEMA = "koe-bench-first-audio/1"
JSON_NAME = "first_audio.json"
#: An agent's typical opener: its first clause is one word, so a first segment can't end there.
SENTENCE = "Sure, I can help you reset your password in just a minute."
ANSWER = (
    "Sure, here's how to get there. Take the Red Line north to Central Station, then switch to the Blue "
    "Line toward the airport. The ride takes about twenty-five minutes. Get off at Harbor Street, and the "
    "museum is on your left."
)
#: scenario → (text, streamed by the simulated LLM, sessions at once)
SCENARIOS: dict[str, tuple[str, bool, int]] = {
    "sentence_whole": (SENTENCE, False, 1),
    "answer_whole": (ANSWER, False, 1),
    "streamed": (ANSWER, True, 1),
    "two_streamed": (ANSWER, True, 2),
}
KOE = "koe_ws"
KOE_BEFORE = "koe_ws_windowed_first_off"
#: Quiet before each turn: what the previous strategy's server left running (its threads winding down,
#: its clean-up) ends before the next is timed. Measured without it: koe's first window took 1.1–1.8× its
#: prediction right after fastkokoro's turn, 0.6–1.3× after one of koe's (2026-12-01, one-off).
SETTLE_S = 1.0
KOE_HTTP = "koe_http"
_OURS = (KOE, KOE_BEFORE, KOE_HTTP)

#: A peer's request for a whole text, timed from the monotonic instant it is given.
Ask = Callable[[str, float], Awaitable[TurnTrace]]


async def koe_http_turn(url: str, text: str, voice: str, *, starts_at: float) -> TurnTrace:
    """``POST /invocations`` streaming PCM: the whole text in one request, audio as it is made."""
    body = {"text": text, "voice": voice, "stream": True, "format": "pcm"}
    trace = TurnTrace(KOE_HTTP, first_sentence_at=0.0)
    return await streamed_pcm_turn(trace, url + "/invocations", body, "koe", starts_at=starts_at)


async def _koe_http_ask(url: str, voice: str, text: str, at: float) -> TurnTrace:
    return await koe_http_turn(url, text, voice, starts_at=at)


async def _whole_text(ask: Ask, name: str, text: str, pace: ReplayPace | None) -> TurnTrace:
    """``ask`` for ``text`` now, or (``pace`` given) once the simulated LLM has written all of it."""
    clock, llm = Clock(), TurnTrace("llm", first_sentence_at=0.0)
    if pace is not None:

        async def ignore(_token: str) -> None:
            return None

        await stream_answer(text, pace, llm, clock, ignore)
    trace = await ask(text, clock.start)
    trace.strategy, trace.tokens, trace.first_sentence_at = name, llm.tokens, llm.first_sentence_at
    return trace


def strategies(
    koe_urls: Mapping[str, str], peers: Mapping[str, Ask], voice: str, text: str, pace: ReplayPace | None
) -> dict[str, Callable[[], Awaitable[TurnTrace]]]:
    """One turn per strategy: koe over WebSocket (each of ``koe_urls``: name → server), over HTTP for a
    whole text, and every peer."""
    turns: dict[str, Callable[[], Awaitable[TurnTrace]]] = {
        name: partial(koe_turn, url, text, pace, voice, strategy=name) for name, url in koe_urls.items()
    }
    if pace is None and KOE in koe_urls:
        http = partial(_koe_http_ask, koe_urls[KOE], voice)
        turns[KOE_HTTP] = partial(_whole_text, http, KOE_HTTP, text, None)
    for name, ask in peers.items():
        turns[name] = partial(_whole_text, ask, name, text, pace)
    return turns


def round_order(names: list[str], repeat: int) -> list[str]:
    """The strategies of round ``repeat`` in an order of their own (seeded: the same run after run), so
    that no strategy always runs right after the same other (a rotation would keep every neighbour)."""
    order = list(names)
    random.Random(repeat).shuffle(order)
    return order


async def measure_scenario(
    turns: Mapping[str, Callable[[], Awaitable[TurnTrace]]],
    sessions: int,
    repeats: int,
    step: Callable[[], None],
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """``repeats`` rounds of every strategy (``sessions`` turns of it at once), each round in its own order
    and each turn after ``settle_s`` of quiet; the summaries, and koe's ratios to its best peer and to
    itself before."""
    names = list(turns)
    runs: dict[str, list[TurnTrace]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in round_order(names, repeat):
            await asyncio.sleep(settle_s)
            runs[name].extend(await asyncio.gather(*(turns[name]() for _ in range(sessions))))
            step()
    summaries = {name: summarize_runs([t.metrics() for t in traces]) for name, traces in runs.items()}
    return {"sessions": sessions, "strategies": summaries, "ratios": ratios(summaries)}


def ratios(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """koe's median first audio and first speech over the best peer's and over koe before the change
    (below 1: koe is earlier)."""
    out: dict[str, float] = {}
    peers = [name for name in summaries if name not in _OURS]
    for metric in ("first_audio_s", "first_speech_s"):
        ours = summaries[KOE][metric]["median"]
        if peers:
            best = min(summaries[name][metric]["median"] for name in peers)
            out[f"koe_over_best_peer_{metric}"] = ours / best
        if KOE_BEFORE in summaries:
            out[f"koe_over_before_{metric}"] = ours / summaries[KOE_BEFORE][metric]["median"]
    return out


def targets(scenarios: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The bar: koe's first audio at or below every peer's in every scenario, no gap for one session."""
    out: dict[str, Any] = {}
    for name, result in scenarios.items():
        ratio = result["ratios"].get("koe_over_best_peer_first_audio_s")
        gaps = result["strategies"][KOE]["gap_count"]["max"]
        out[name] = {
            "first_audio_at_or_below_every_peer": None if ratio is None else ratio <= 1.0,
            "koe_gaps_max": gaps,
            "gap_free": gaps == 0 if result["sessions"] == 1 else None,
        }
    return out


@contextmanager
def peers(
    config: BenchConfig, kokoro: Any, workdir: Path, report: dict[str, Any]
) -> Iterator[dict[str, Ask]]:
    """kokoro-onnx (loaded by the caller from ``workdir``'s model and voice files) and fastkokoro's servers on
    the same files, when its environment (``config.peer_python``) exists; what was found goes in
    ``report["peers"]``."""
    asks: dict[str, Ask] = {"kokoro_onnx_create_stream": partial(_kokoro_onnx_ask, kokoro, config.voice)}
    report["peers"] = {peer.PEER: peer.version()}
    found = fastkokoro.version(config.peer_python)
    report["peers"][fastkokoro.PEER] = found or f"not installed ({config.peer_python}): make bench-peers"
    with ExitStack() as stack:
        if found is not None:
            for strategy in fastkokoro.STRATEGIES:
                url = stack.enter_context(
                    fastkokoro.server(
                        config.peer_python, strategy, workdir / peer.MODEL_FILE, workdir / peer.VOICES_FILE
                    )
                )
                asks[f"fastkokoro_{strategy}"] = partial(_fastkokoro_ask, url, config.voice, strategy)
        yield asks


@contextmanager
def koe_servers(settings: Settings, speech: Speech) -> Iterator[dict[str, str]]:
    """koe as configured and koe with ``windowed_first`` off, both in this process on ``speech``."""
    with (
        in_process_server(settings, speech) as url,
        in_process_server(replace(settings, windowed_first=False), speech) as before,
    ):
        yield {KOE: url, KOE_BEFORE: before}


async def _kokoro_onnx_ask(kokoro: Any, voice: str, text: str, at: float) -> TurnTrace:
    return await peer.create_stream_turn(kokoro, text, voice, starts_at=at)


async def _fastkokoro_ask(url: str, voice: str, strategy: str, text: str, at: float) -> TurnTrace:
    return await fastkokoro.speech_turn(url, text, voice, f"fastkokoro_{strategy}", starts_at=at)


async def measure(
    config: BenchConfig,
    koe_urls: Mapping[str, str],
    peers: Mapping[str, Ask],
    step: Callable[[], None],
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """Every scenario in order; each one's summaries and ratios."""
    results: dict[str, Any] = {}
    for name, (text, streamed, sessions) in SCENARIOS.items():
        turns = strategies(koe_urls, peers, config.voice, text, config.pace if streamed else None)
        results[name] = await measure_scenario(turns, sessions, config.repeats, step, settle_s)
    return results


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """``koe bench --only first-audio``: koe's servers in this process, the peers beside them, the report."""
    started = time.monotonic()
    settings = bench_settings()
    texts = {name: text for name, (text, _, _) in SCENARIOS.items()}
    report = report_head(
        SCHEMA,
        command,
        {"voice": config.voice, "repeats": config.repeats, **pace_fields(config.pace), "texts": texts},
    )
    options = SpeechOptions.from_settings(settings, warmup=False)
    speech = Speech.load(options)
    model = locate("onnx", options.model_dir, options.download, list(options.voices)).model_bytes()
    with tempfile.TemporaryDirectory(prefix="koe-bench-") as workdir:
        kokoro = peer.load_kokoro_onnx(model, speech.voices, Path(workdir))
        with peers(config, kokoro, Path(workdir), report) as asks, koe_servers(settings, speech) as urls:
            scenarios = asyncio.run(measure(config, urls, asks, lambda: None))
    report["scenarios"] = scenarios
    report["targets"] = targets(scenarios)
    stamp_end(report, started)
    return report


def _cells(summary: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        seconds(summary["first_audio_s"]),
        seconds(summary.get("first_speech_s")),
        gaps(summary["gap_count"]),
        seconds(summary["max_gap_s"], "max"),
        seconds(summary["audio_s"]),
    )


def table(report: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The run as a report table: title, columns, rows (a strategy of a scenario each), notes (medians)."""
    columns = ("scenario", "strategy", "first audio s", "first speech s", "gaps (max)", "longest gap s",
               "audio s")  # fmt: skip
    rows = strategy_rows(report["scenarios"], _cells)
    notes = [
        f"{scenario}: koe / best peer first audio {result['ratios']['koe_over_best_peer_first_audio_s']:.2f}"
        for scenario, result in report["scenarios"].items()
        if "koe_over_best_peer_first_audio_s" in result["ratios"]
    ]
    return "10 · first audio: koe against the peer servers (medians)", columns, rows, notes
