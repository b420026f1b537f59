"""One agent turn per strategy, against a koe server, traced on the client's clock.

The answer streams from :class:`~koe.agent.replay.ReplaySource` (a simulated LLM, same pace for every
strategy). Each strategy differs only in what it sends and when the listener may play the audio:

* **batch** waits for the whole answer, then one ``POST /invocations`` with ``stream=false``: the listener
  gets one file when all of it is synthesized (what an agent without streaming does);
* **aws_sample** sends one AWS-sample message per sentence (split with ``(?<=[.!?])\\s+`` as soon as a
  sentence is complete); the sample sends a message's audio only after synthesizing all of it, so each
  message's audio is released to the listener at its ``synthesis_complete``;
* **koe** appends every token as it comes and flushes at the end; audio plays as its frames arrive.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from koe.agent.replay import ReplayPace, ReplaySource
from koe.client.websocket import connect, stream_url
from koe.errors import UpstreamError
from koe.types import SAMPLE_RATE
from koe.wire.messages import Error, Flushed, SegmentStart, SynthesisComplete
from koe_bench.stats import Chunk, Playback, onset_s, simulate_playback

#: The AWS sample's own sentence split.
AWS_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
#: Where the first sentence is complete, for "first sentence available → first audio" in every strategy.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_PCM16_BYTES = 2
STRATEGIES = ("batch", "aws_sample", "koe")
#: No turn of a benchmark takes longer than this; past it the server is stuck and the run must stop.
TURN_TIMEOUT_S = 600.0


@dataclass
class TurnTrace:
    """Everything a turn's timeline shows, in seconds since the turn started (the request)."""

    strategy: str
    tokens: list[float] = field(default_factory=list)  # when each token of the answer was available
    first_sentence_at: float | None = None
    segments: list[float] = field(default_factory=list)  # when each segment / message finished synthesis
    segment_texts: list[str] = field(default_factory=list)  # each segment's text, where the server says it
    chunks: list[Chunk] = field(default_factory=list)  # audio as the listener may play it
    done_at: float = 0.0

    @property
    def playback(self) -> Playback:
        return simulate_playback(self.chunks)

    @property
    def first_audio_s(self) -> float:
        if not self.chunks:
            raise UpstreamError(f"the {self.strategy} turn produced no audio")
        return min(c.at for c in self.chunks)

    def metrics(self) -> dict[str, float | int | None]:
        """The figures of this run that the report summarizes."""
        playback = self.playback
        return {
            "first_audio_s": self.first_audio_s,
            "first_speech_s": playback.first_speech_at,
            "first_audio_after_sentence_s": (
                None if self.first_sentence_at is None else self.first_audio_s - self.first_sentence_at
            ),
            "total_s": self.done_at,
            "audio_s": sum(c.duration_s for c in self.chunks),
            "gap_count": playback.gap_count,
            "gap_total_s": playback.gap_total_s,
            "max_gap_s": playback.max_gap_s,
        }

    def timeline(self) -> dict[str, Any]:
        """The trace as JSON-ready lists (rounded to the millisecond)."""
        playback = self.playback
        return {
            "tokens": [round(t, 3) for t in self.tokens],
            "first_sentence_at": None if self.first_sentence_at is None else round(self.first_sentence_at, 3),
            "segments": [round(t, 3) for t in self.segments],
            "audio": [[round(c.at, 3), round(c.duration_s, 3)] for c in self.chunks],
            "played": [[round(a, 3), round(b, 3)] for a, b in playback.played],
            "gaps": [[round(a, 3), round(b, 3)] for a, b in playback.heard_gaps],
            "done_at": round(self.done_at, 3),
        }


class Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.start


def pcm_chunk(at: float, pcm16: bytes, rate: int = SAMPLE_RATE) -> Chunk:
    """16-bit mono ``pcm16`` at ``rate`` that reached the listener at ``at``: its length and where its
    speech starts."""
    samples = np.frombuffer(pcm16[: len(pcm16) // _PCM16_BYTES * _PCM16_BYTES], dtype="<i2") / 32768
    return Chunk(at, len(samples) / rate, onset_s(samples, rate))


class PcmReader:
    """A byte stream of 16-bit PCM into ``trace``'s chunks, timed on arrival from ``starts_at`` (monotonic);
    a sample split across two reads is kept for the next."""

    def __init__(self, trace: TurnTrace, starts_at: float) -> None:
        self._trace = trace
        self._starts_at = starts_at
        self._carry = b""

    def add(self, data: bytes) -> None:
        data = self._carry + data
        whole = len(data) // _PCM16_BYTES * _PCM16_BYTES
        self._carry = data[whole:]
        if whole:
            self._trace.chunks.append(pcm_chunk(time.monotonic() - self._starts_at, data[:whole]))


async def streamed_pcm_turn(
    trace: TurnTrace, url: str, body: Mapping[str, Any], server: str, *, starts_at: float
) -> TurnTrace:
    """``POST url`` with ``body``, its streamed 16-bit PCM into ``trace``, timed from ``starts_at``
    (monotonic); ``server`` names who answered in an error."""
    reader = PcmReader(trace, starts_at)
    async with (
        httpx.AsyncClient(timeout=TURN_TIMEOUT_S) as http,
        http.stream("POST", url, json=body) as response,
    ):
        if response.status_code != 200:
            await response.aread()
            raise UpstreamError(f"{server} answered {response.status_code}: {response.text[:200]}")
        async for data in response.aiter_bytes():
            reader.add(data)
    trace.done_at = time.monotonic() - starts_at
    return trace


def split_sentences(text: str) -> tuple[list[str], str]:
    """The AWS sample's split of streamed text: (complete sentences, the unfinished rest).

    A sentence is complete once whitespace follows its ``.``, ``!`` or ``?`` (the next token has begun).
    """
    *complete, rest = AWS_SENTENCE_SPLIT.split(text)
    return [sentence for sentence in complete if sentence.strip()], rest


class TokenLog:
    """Notes in ``trace`` when each token of ``answer`` came, and when its first sentence was complete."""

    def __init__(self, answer: str, trace: TurnTrace) -> None:
        end = _SENTENCE_END.search(answer)
        self._sentence_end = end.start() if end else len(answer) - 1
        self._trace = trace
        self._written = 0

    def add(self, token: str, at: float) -> None:
        self._trace.tokens.append(at)
        self._written += len(token)
        if self._trace.first_sentence_at is None and self._written > self._sentence_end:
            self._trace.first_sentence_at = at


async def stream_answer(
    answer: str, pace: ReplayPace, trace: TurnTrace, clock: Clock, on_token: Callable[[str], Awaitable[None]]
) -> None:
    """Feed the simulated LLM's tokens to ``on_token``, noting when each (and the first sentence) came."""
    log = TokenLog(answer, trace)
    async for token in ReplaySource(answer, pace).stream([]):
        log.add(token, clock.now())
        await on_token(token)


async def batch_turn(base_url: str, answer: str, pace: ReplayPace, voice: str) -> TurnTrace:
    """Wait for the whole answer, then synthesize it in one non-streaming request."""
    trace = TurnTrace("batch")
    parts: list[str] = []

    async def collect(token: str) -> None:
        parts.append(token)

    async with httpx.AsyncClient(base_url=base_url, timeout=TURN_TIMEOUT_S) as http:
        clock = Clock()
        await stream_answer(answer, pace, trace, clock, collect)
        body = {"text": "".join(parts), "voice": voice, "stream": False, "format": "pcm"}
        response = await http.post("/invocations", json=body)
        if response.status_code != 200:
            raise UpstreamError(f"batch request failed with {response.status_code}: {response.text[:200]}")
        trace.done_at = clock.now()
    trace.segments.append(trace.done_at)
    trace.chunks.append(pcm_chunk(trace.done_at, response.content))
    return trace


async def aws_sample_turn(base_url: str, answer: str, pace: ReplayPace, voice: str) -> TurnTrace:
    """One AWS-sample message per complete sentence; each message's audio plays once all of it is made."""
    trace = TurnTrace("aws_sample")
    async with aclosing(await connect(stream_url(base_url, voice=voice))) as client:
        clock = Clock()
        pending = ""
        sent = 0

        async def send(sentence: str) -> None:
            nonlocal sent
            await client.send({"text": sentence, "request_id": sent})
            sent += 1

        async def on_token(token: str) -> None:
            nonlocal pending
            complete, pending = split_sentences(pending + token)
            for sentence in complete:
                await send(sentence)

        async def writer() -> None:
            await stream_answer(answer, pace, trace, clock, on_token)
            if pending.strip():
                await send(pending)

        async def reader(writing: asyncio.Task[None]) -> None:
            held, completed = bytearray(), 0
            # the writer may finish while we wait for audio: wait for whichever comes first
            incoming = asyncio.ensure_future(client.receive())
            try:
                while not (writing.done() and completed == sent):
                    await asyncio.wait(
                        [incoming] if writing.done() else [incoming, writing],
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    if not incoming.done():
                        continue
                    message, incoming = incoming.result(), asyncio.ensure_future(client.receive())
                    if isinstance(message, bytes):
                        held += message
                    elif isinstance(message, SynthesisComplete):
                        at = clock.now()
                        trace.segments.append(at)
                        trace.chunks.append(pcm_chunk(at, bytes(held)))
                        held, completed = bytearray(), completed + 1
                    elif isinstance(message, Error):
                        raise UpstreamError(f"the server answered {message.code}: {message.message}")
            finally:
                incoming.cancel()

        return await run_turn(trace, clock, writer, reader)


async def koe_turn(
    base_url: str, answer: str, pace: ReplayPace | None, voice: str, *, strategy: str = "koe"
) -> TurnTrace:
    """``append`` per token and ``flush``; ``pace=None`` appends the whole answer at once. ``strategy``
    names the trace (the same client against a server with other settings)."""
    trace = TurnTrace(strategy)
    async with aclosing(await connect(stream_url(base_url, voice=voice))) as client:
        clock = Clock()

        async def writer() -> None:
            if pace is None:
                trace.tokens.append(clock.now())
                trace.first_sentence_at = clock.now()
                await client.append(answer)
            else:
                await stream_answer(answer, pace, trace, clock, client.append)
            await client.flush()

        async def reader(writing: asyncio.Task[None]) -> None:
            while True:
                message = await client.receive()
                if isinstance(message, bytes):
                    trace.chunks.append(pcm_chunk(clock.now(), message))
                elif isinstance(message, SegmentStart):
                    trace.segments.append(clock.now())
                    trace.segment_texts.append(message.text)
                elif isinstance(message, Flushed):
                    return
                elif isinstance(message, Error):
                    raise UpstreamError(
                        f"the server answered {message.code}: {message.message}", code=message.code
                    )

        return await run_turn(trace, clock, writer, reader)


async def run_turn(
    trace: TurnTrace,
    clock: Clock,
    writer: Callable[[], Coroutine[Any, Any, None]],
    reader: Callable[[asyncio.Task[None]], Coroutine[Any, Any, None]],
) -> TurnTrace:
    """Run both halves of a turn, then note its end in ``trace`` on ``clock``; a failure of either half
    cancels the other; bounded by :data:`TURN_TIMEOUT_S`."""
    async with asyncio.timeout(TURN_TIMEOUT_S), asyncio.TaskGroup() as tg:
        writing = tg.create_task(writer())
        tg.create_task(reader(writing))
    trace.done_at = clock.now()
    return trace


TURNS: dict[str, Callable[[str, str, ReplayPace, str], Awaitable[TurnTrace]]] = {
    "batch": batch_turn,
    "aws_sample": aws_sample_turn,
    "koe": koe_turn,
}
