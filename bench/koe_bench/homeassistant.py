"""Wyoming: koe against wyoming-piper (Home Assistant's default local TTS), asked by one reference client.

One client, ``wyoming``'s ``AsyncTcpClient``, asks both servers what Home Assistant asks: an answer streamed
by the simulated LLM (``synthesize-start``, a ``synthesize-chunk`` per token, the whole text again in a
``synthesize`` for servers that do not stream, ``synthesize-stop``), and whole texts in one ``synthesize``.
wyoming-piper 2.5.2 streams too: it synthesizes each sentence once its sentence detector has seen it end, and
sends each as its own ``audio-start`` … ``audio-stop``. koe is its Wyoming server in this process; the peer
runs in its own environment (:mod:`koe_bench.piper`) with its own voice (Piper's, not Kokoro's: Home
Assistant users choose between the two). Every figure is on the client's clock from the request's first
event; "after 1st sentence" counts from the token that completes the first sentence, which for these texts is
also the first clause koe may cut (its first clause, "Sure,", is one word).
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from koe.agent.replay import ReplayPace
from koe.errors import ConfigError, UpstreamError
from koe.extras import BENCH_INSTALL_HINT
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench import piper
from koe_bench.config import BenchConfig
from koe_bench.firstaudio import ANSWER, SENTENCE, SETTLE_S, round_order
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import summarize_runs
from koe_bench.tables import gaps, seconds, strategy_rows
from koe_bench.target import bench_settings, in_process_app
from koe_bench.turns import Clock, TurnTrace, pcm_chunk, run_turn, stream_answer

SCHEMA = "koe-bench-wyoming/1"
JSON_NAME = "wyoming.json"
KOE = "koe"
PEER = "wyoming_piper"
#: scenario → (text, streamed by the simulated LLM)
SCENARIOS: dict[str, tuple[str, bool]] = {
    "streamed": (ANSWER, True),
    "answer_whole": (ANSWER, False),
    "sentence_whole": (SENTENCE, False),
}
#: The issue's bar for koe on this machine: first audio this soon after the first clause is written …
TARGET_AFTER_CLAUSE_S = 0.5
#: … and never this long without audio while the text is still coming (satellites give up at 5 s).
TARGET_LONGEST_WAIT_S = 5.0
#: The figures whose koe / peer ratio of medians the report gives (below 1: koe is sooner).
RATIO_METRICS = ("first_audio_s", "first_audio_after_sentence_s", "first_speech_s", "total_s")
_PCM16_BYTES = 2

#: One server's turn: the text, streamed at the pace or (``None``) sent whole.
Turn = Callable[[str, ReplayPace | None], Awaitable[TurnTrace]]


async def wyoming_turn(port: int, voice: str, name: str, text: str, pace: ReplayPace | None) -> TurnTrace:
    """One request to the Wyoming server on loopback ``port`` in ``voice``, traced as ``name``: ``text``
    streamed at ``pace`` as Home Assistant streams it, or whole (``pace`` ``None``). Audio counts from its
    ``audio-chunk``\\ s; the turn ends at ``synthesize-stopped`` (streamed) or ``audio-stop`` (whole).

    Raises:
        UpstreamError: the server answered an ``error`` or closed the connection before the end.
    """
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

    trace = TurnTrace(name)
    chosen = SynthesizeVoice(name=voice)
    last = "audio-stop" if pace is None else "synthesize-stopped"
    async with AsyncTcpClient("127.0.0.1", port) as client:
        clock = Clock()

        async def chunk(token: str) -> None:
            await client.write_event(SynthesizeChunk(text=token).event())

        async def writer() -> None:
            if pace is None:
                trace.tokens.append(clock.now())
                trace.first_sentence_at = clock.now()
                await client.write_event(Synthesize(text=text, voice=chosen).event())
                return
            await client.write_event(SynthesizeStart(voice=chosen).event())
            await stream_answer(text, pace, trace, clock, chunk)
            await client.write_event(Synthesize(text=text, voice=chosen).event())
            await client.write_event(SynthesizeStop().event())

        async def reader(_writing: asyncio.Task[None]) -> None:
            while True:
                event = await client.read_event()
                if event is None:
                    raise UpstreamError(f"{name} closed the connection before {last}")
                if AudioChunk.is_type(event.type):
                    audio = AudioChunk.from_event(event)
                    if (audio.width, audio.channels) != (_PCM16_BYTES, 1):
                        raise UpstreamError(
                            f"{name} sent {audio.width}-byte samples in {audio.channels} channels; expected "
                            "16-bit mono"
                        )
                    trace.chunks.append(pcm_chunk(clock.now(), audio.audio, audio.rate))
                elif event.type == "audio-start":
                    trace.segments.append(clock.now())
                elif Error.is_type(event.type):
                    error = Error.from_event(event)
                    raise UpstreamError(f"{name} answered {error.code}: {error.text}")
                elif event.type == last:
                    return

        return await run_turn(trace, clock, writer, reader)


def ratios(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """koe's median over the peer's for each of :data:`RATIO_METRICS` both have (below 1: koe sooner)."""
    return {
        f"koe_over_peer_{metric}": summaries[KOE][metric]["median"] / summaries[PEER][metric]["median"]
        for metric in RATIO_METRICS
        if metric in summaries[KOE] and metric in summaries[PEER]
    }


async def measure(
    turns: Mapping[str, Turn],
    pace: ReplayPace,
    repeats: int,
    step: Callable[[], None],
    settle_s: float = SETTLE_S,
    scenarios: Mapping[str, tuple[str, bool]] = SCENARIOS,
) -> dict[str, Any]:
    """Each server warmed by one untimed whole sentence (wyoming-piper loads its voice on the first request),
    then every scenario (name → text, streamed): ``repeats`` rounds of every server, each round in its own
    order and each turn after ``settle_s`` of quiet; per scenario the summaries, koe's ratios to the peer,
    and the last run's timeline of each server."""
    for turn in turns.values():
        await turn(SENTENCE, None)
    results: dict[str, Any] = {}
    for scenario, (text, streamed) in scenarios.items():
        runs: dict[str, list[TurnTrace]] = {name: [] for name in turns}
        for repeat in range(repeats):
            for name in round_order(list(turns), repeat):
                await asyncio.sleep(settle_s)
                runs[name].append(await turns[name](text, pace if streamed else None))
                step()
        summaries = {name: summarize_runs([t.metrics() for t in traces]) for name, traces in runs.items()}
        results[scenario] = {
            "strategies": summaries,
            "ratios": ratios(summaries) if PEER in summaries else {},
            "timelines": {name: traces[-1].timeline() for name, traces in runs.items()},
        }
    return results


def targets(scenarios: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's bar for koe, from the streamed answer: first audio ≤ 0.5 s after the first clause
    (median), no gap in any run, and no wait for audio of 5 s or more while the text is coming (the first
    audio and every gap, worst run)."""
    koe = scenarios["streamed"]["strategies"][KOE]
    after = koe["first_audio_after_sentence_s"]["median"]
    gaps = koe["gap_count"]["max"]
    wait = max(koe["first_audio_s"]["max"], koe["max_gap_s"]["max"])
    return {
        "first_audio_after_first_clause_s": {
            "target": TARGET_AFTER_CLAUSE_S,
            "measured": after,
            "met": after <= TARGET_AFTER_CLAUSE_S,
        },
        "gaps_one_listener": {"target": 0, "measured": gaps, "met": gaps == 0},
        "longest_wait_for_audio_s": {
            "target": TARGET_LONGEST_WAIT_S,
            "measured": wait,
            "met": wait < TARGET_LONGEST_WAIT_S,
        },
    }


@contextmanager
def koe_server(settings: Settings, speech: Speech) -> Iterator[int]:
    """koe's Wyoming server on a free loopback port, in this process on ``speech``; yields its port."""
    with in_process_app(replace(settings, wyoming_port=0), speech) as running:
        port: int = running.app.state.wyoming.port
        yield port


def require_client() -> None:
    """Fail before loading the model when the reference client is missing.

    Raises:
        ConfigError: ``wyoming`` is not installed (``missing_extra``).
    """
    if importlib.util.find_spec("wyoming") is None:
        raise ConfigError(
            f"koe bench --only wyoming drives both servers with the wyoming client: {BENCH_INSTALL_HINT}",
            code="missing_extra",
        )


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """``koe bench --only wyoming``: koe's Wyoming server in this process, wyoming-piper beside it (when
    ``config.piper_python``'s environment has it; else koe alone, and the report says why), the report.

    Raises:
        ConfigError: the wyoming client is missing.
        UpstreamError: a server failed to start or answered an error.
    """
    require_client()
    started = time.monotonic()
    settings = bench_settings()
    found = piper.installed(config.piper_python)
    report = report_head(
        SCHEMA,
        command,
        {
            "voices": {KOE: config.voice, PEER: piper.VOICE},
            "repeats": config.repeats,
            **pace_fields(config.pace),
            "texts": {name: text for name, (text, _) in SCENARIOS.items()},
            "workers": settings.layout.workers,
            "threads_per_worker": settings.layout.threads,
        },
    )
    report["peer"] = (
        found.versions if found is not None else f"not installed ({config.piper_python}): make bench-peers"
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=False))
    with koe_server(settings, speech) as koe_port, _peer(config.piper_python, found) as peer_port:
        turns: dict[str, Turn] = {KOE: partial(wyoming_turn, koe_port, config.voice, KOE)}
        if peer_port is not None:
            turns[PEER] = partial(wyoming_turn, peer_port, piper.VOICE, PEER)
        scenarios = asyncio.run(measure(turns, config.pace, config.repeats, lambda: None))
    report["scenarios"] = scenarios
    report["targets"] = targets(scenarios)
    stamp_end(report, started)
    return report


@contextmanager
def _peer(python: Path, found: piper.Installed | None) -> Iterator[int | None]:
    if found is None:
        yield None
        return
    with piper.server(python, found) as port:
        yield port


def _cells(summary: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        seconds(summary["first_audio_s"]),
        seconds(summary["first_audio_after_sentence_s"]),
        seconds(summary.get("first_speech_s")),
        seconds(summary["total_s"]),
        gaps(summary["gap_count"]),
        seconds(summary["max_gap_s"], "max"),
        seconds(summary["audio_s"]),
    )


def table(report: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The run as a report table: title, columns, rows (a server of a scenario each), notes (ratios)."""
    columns = ("scenario", "server", "first audio s", "after 1st sentence s", "first speech s", "end s",
               "gaps (max)", "longest gap s", "audio s")  # fmt: skip
    rows = strategy_rows(report["scenarios"], _cells)
    notes = [
        f"{scenario}: koe / wyoming-piper "
        + ", ".join(f"{key.removeprefix('koe_over_peer_')} {value:.2f}" for key, value in ratios.items())
        for scenario, ratios in ((name, result["ratios"]) for name, result in report["scenarios"].items())
        if ratios
    ]
    return "12 · Wyoming: koe against wyoming-piper (medians)", columns, rows, notes
