"""The agent's read-aloud against ``/v1/stream``: the same text at the same pace, one first-segment rule.

Both paths speak the first-audio scenario's streamed answer, written by the simulated LLM at one
:class:`~koe.agent.replay.ReplayPace` (the page's 20 tokens/s after the replay's first-token delay), on one
koe server in this process:

* **agent**: a ``read`` request on ``/agent/ws``, as the page sends it; the server's replay writes the text
  into the agent's pipeline. Timed from the moment the request is sent.
* **stream**: koe's own WebSocket; the client appends the same tokens at the same pace after the same
  first-token delay (:func:`koe_bench.turns.koe_turn`). Timed from the moment the turn starts.

Each round runs both, in an order of its own, after a quiet pause; the report holds both paths' summaries
(first audio, first speech, gaps per listener), agent / stream of the medians and of each round, and each
round's first segment on both paths (its text and when it came), which is where two first-segment rules
would show.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from websockets.asyncio.client import connect

from koe.agent.replay import DEFAULT_FIRST_TOKEN_DELAY_S, ReplayPace
from koe.errors import UpstreamError
from koe.pipeline.speech import Speech, SpeechOptions
from koe_bench.config import BenchConfig
from koe_bench.firstaudio import ANSWER, SETTLE_S, round_order
from koe_bench.rawclient import ws_url
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import summarize_runs
from koe_bench.tables import gaps, seconds
from koe_bench.target import bench_settings, in_process_server
from koe_bench.turns import TURN_TIMEOUT_S, Clock, TokenLog, TurnTrace, koe_turn, pcm_chunk

SCHEMA = "koe-bench-agent-vs-stream/1"
JSON_NAME = "agent_vs_stream.json"
#: The page's read-aloud pace (docs/agent-page.json): what a newcomer hears first.
PACE = ReplayPace(tokens_per_s=20.0, first_token_delay_s=DEFAULT_FIRST_TOKEN_DELAY_S)
AGENT = "agent_ws_read"
STREAM = "v1_stream"
#: The bar (issue 36): each path's median within this factor of the other's.
WITHIN = 1.3
_METRICS = ("first_audio_s", "first_speech_s")

#: One path's turn: the text, its pace, the voice.
Turn = Callable[[str, ReplayPace, str], Awaitable[TurnTrace]]


async def agent_read_turn(base_url: str, text: str, pace: ReplayPace, voice: str) -> TurnTrace:
    """``/agent/ws`` read-aloud of ``text`` at ``pace``, timed from the moment the request is sent: the
    text as the server's replay wrote it (its ``text_delta`` events), each segment as it was announced, the
    audio as its frames arrived."""
    trace = TurnTrace(AGENT)
    log = TokenLog(text, trace)
    async with asyncio.timeout(TURN_TIMEOUT_S), connect(ws_url(base_url) + "/agent/ws") as ws:
        _event(await ws.recv(), "session")
        clock = Clock()
        request = {"type": "read", "text": text, "voice": voice, "tokens_per_s": pace.tokens_per_s,
                   "first_token_delay_s": pace.first_token_delay_s}  # fmt: skip
        await ws.send(json.dumps(request))
        async for frame in ws:
            if isinstance(frame, bytes):
                trace.chunks.append(pcm_chunk(clock.now(), frame))
                continue
            event = _event(frame)
            if event["type"] == "text_delta":
                log.add(event["text"], clock.now())
            elif event["type"] == "segment":
                trace.segments.append(clock.now())
                trace.segment_texts.append(event["text"])
            elif event["type"] == "error":
                raise UpstreamError(f"the agent answered {event['code']}: {event['message']}")
            elif event["type"] == "done":
                trace.done_at = clock.now()
                return trace
    raise UpstreamError("the agent closed its socket before the turn's done")


def _event(frame: str | bytes, expected: str | None = None) -> dict[str, Any]:
    """An agent event (a JSON text frame), of type ``expected`` when given.

    Raises:
        UpstreamError: a binary frame, or an event of another type than ``expected``.
    """
    if isinstance(frame, bytes):
        raise UpstreamError(f"expected a JSON event from the agent, got {len(frame)} bytes of audio")
    event: dict[str, Any] = json.loads(frame)
    if expected is not None and event.get("type") != expected:
        raise UpstreamError(f"expected the agent's {expected} event, got {frame[:200]}")
    return event


def paths(base_url: str) -> dict[str, Turn]:
    """The two paths against the koe server at ``base_url``."""
    return {AGENT: partial(agent_read_turn, base_url), STREAM: partial(_stream_turn, base_url)}


async def _stream_turn(base_url: str, text: str, pace: ReplayPace, voice: str) -> TurnTrace:
    return await koe_turn(base_url, text, pace, voice, strategy=STREAM)


async def measure(
    turns: Mapping[str, Turn],
    text: str,
    pace: ReplayPace,
    voice: str,
    repeats: int,
    step: Callable[[], None] = lambda: None,
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """``repeats`` rounds of both paths (each round in its own order, each turn after ``settle_s`` of
    quiet): their summaries, agent / stream of the medians, and every round's figures and first segments."""
    traces: dict[str, list[TurnTrace]] = {name: [] for name in turns}
    for repeat in range(repeats):
        for name in round_order(list(turns), repeat):
            await asyncio.sleep(settle_s)
            traces[name].append(await turns[name](text, pace, voice))
            step()
    summaries = {name: summarize_runs([t.metrics() for t in runs]) for name, runs in traces.items()}
    medians = {metric: _ratio(summaries[AGENT], summaries[STREAM], metric) for metric in _METRICS}
    rounds = [_round(agent, stream) for agent, stream in zip(traces[AGENT], traces[STREAM], strict=True)]
    return {"paths": summaries, "agent_over_stream": medians, "rounds": rounds}


def _ratio(agent: Mapping[str, Any], stream: Mapping[str, Any], metric: str) -> float | None:
    """Agent / stream of ``metric``'s medians (``None`` when either path never reached it)."""
    if metric not in agent or metric not in stream:
        return None
    return float(agent[metric]["median"] / stream[metric]["median"])


def _round(agent: TurnTrace, stream: TurnTrace) -> dict[str, Any]:
    """One round: both paths' figures and first segments, and agent / stream of each figure."""
    figures = {AGENT: agent.metrics(), STREAM: stream.metrics()}
    out: dict[str, Any] = {
        name: {
            **{key: figures[name][key] for key in (*_METRICS, "gap_count", "max_gap_s")},
            "first_sentence_at_s": trace.first_sentence_at,
            "first_segment_at_s": trace.segments[0] if trace.segments else None,
            "first_segment_text": trace.segment_texts[0] if trace.segment_texts else None,
        }
        for name, trace in ((AGENT, agent), (STREAM, stream))
    }
    for metric in _METRICS:
        ours, theirs = figures[AGENT][metric], figures[STREAM][metric]
        out[f"agent_over_stream_{metric}"] = None if ours is None or not theirs else float(ours) / theirs
    return out


def targets(result: Mapping[str, Any]) -> dict[str, Any]:
    """The bar: both medians within :data:`WITHIN` of each other, either way; no gap for either listener."""
    out: dict[str, Any] = {}
    for metric, ratio in result["agent_over_stream"].items():
        out[f"{metric}_within_{WITHIN:g}x"] = None if ratio is None else 1 / WITHIN <= ratio <= WITHIN
    for name, summary in result["paths"].items():
        out[f"{name}_gap_free"] = summary["gap_count"]["max"] == 0
    return out


def run_alone(config: BenchConfig, command: str, pace: ReplayPace = PACE) -> dict[str, Any]:
    """``koe bench --only agent-vs-stream``: one koe server in this process (segment cache off: the same
    text again would be a replay), both paths against it, the report."""
    started = time.monotonic()
    settings = bench_settings()
    report = report_head(
        SCHEMA,
        command,
        {"voice": config.voice, "repeats": config.repeats, **pace_fields(pace), "text": ANSWER},
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=True))
    with in_process_server(settings, speech) as url:
        result = asyncio.run(measure(paths(url), ANSWER, pace, config.voice, config.repeats))
    report["result"] = result
    report["targets"] = targets(result)
    stamp_end(report, started)
    return report


def table(report: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The run as a report table: title, columns, rows (a path each), notes (the ratios)."""
    columns: tuple[str, ...] = ("path", "first audio s", "first speech s", "gaps (max)", "longest gap s")
    rows: list[tuple[str, ...]] = [
        (
            str(name),
            seconds(summary["first_audio_s"]),
            seconds(summary.get("first_speech_s")),
            gaps(summary["gap_count"]),
            seconds(summary["max_gap_s"], "max"),
        )
        for name, summary in report["result"]["paths"].items()
    ]
    notes = [
        f"agent / stream {metric}: " + ("—" if ratio is None else f"{ratio:.2f}")
        for metric, ratio in report["result"]["agent_over_stream"].items()
    ]
    return "agent read-aloud against /v1/stream, same text and pace (medians)", columns, rows, notes
