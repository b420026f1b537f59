"""Barge-in: cancel a turn at a random moment after its first audio and time how fast the audio stops.

Each run opens one turn (the whole answer, then ``flush``), waits for its first audio frame, waits a
random delay, sends ``cancel``, and notes when ``cancelled`` arrives and when the last audio frame did, and
how much audio the client held unplayed when it cancelled (the server sends ahead of playback: a player
must drop that much at once for the barge-in to be heard).
It then listens a little longer: any audio after ``cancelled`` breaks the protocol's promise and is
counted (it must stay 0).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from koe.client.websocket import StreamClient, connect, stream_url
from koe.errors import UpstreamError
from koe.types import SAMPLE_RATE
from koe.wire.messages import Cancelled, Error
from koe_bench.stats import Chunk, simulate_playback

#: The cancel comes this long after the first audio, drawn uniformly (seeded): early and mid-segment.
CANCEL_DELAY_S = (0.05, 1.5)
#: How long to keep listening after ``cancelled`` for stray audio of the cancelled turn.
LISTEN_AFTER_S = 0.3
_WAIT_S = 120.0
_PCM16_BYTES = 2


@dataclass(frozen=True, slots=True)
class BargeIn:
    delay_s: float  # from first audio to sending cancel
    cancel_to_cancelled_s: float
    cancel_to_last_audio_s: float  # 0 when no audio frame arrived after the cancel was sent
    unplayed_at_cancel_s: float  # audio received but not yet played (real-time player) at the cancel
    audio_after_cancelled: int  # frames received after ``cancelled`` (must be 0)


async def barge_in(client: StreamClient, answer: str, delay_s: float) -> BargeIn:
    """One barge-in on an open session (which stays usable for the next turn)."""
    first_audio = asyncio.Event()
    cancelled = asyncio.Event()
    last_audio = 0.0
    cancelled_at: float | None = None
    after_cancelled = 0
    received: list[Chunk] = []

    async def read() -> None:
        nonlocal last_audio, cancelled_at, after_cancelled
        while True:
            message = await client.receive()
            now = time.monotonic()
            if isinstance(message, bytes):
                received.append(Chunk(now, len(message) / (_PCM16_BYTES * SAMPLE_RATE)))
                last_audio = now
                first_audio.set()
                after_cancelled += cancelled.is_set()
            elif isinstance(message, Cancelled):
                cancelled_at = now
                cancelled.set()
            elif isinstance(message, Error):
                raise UpstreamError(f"the server answered {message.code}: {message.message}")

    reader = asyncio.create_task(read())
    try:
        await client.append(answer)
        await client.flush()
        async with asyncio.timeout(_WAIT_S):
            await _unless_failed(first_audio.wait(), reader)
        await asyncio.sleep(delay_s)
        sent_at = time.monotonic()
        await client.cancel()
        playback_ends = simulate_playback(received).ends_at
        async with asyncio.timeout(_WAIT_S):
            await _unless_failed(cancelled.wait(), reader)
        await asyncio.sleep(LISTEN_AFTER_S)
    finally:
        reader.cancel()
        await asyncio.wait([reader])
    if not reader.cancelled() and (error := reader.exception()) is not None:
        raise UpstreamError(f"the barge-in session failed: {error}") from error
    assert cancelled_at is not None  # set before cancelled.wait() returned
    assert playback_ends is not None  # the first audio came before the cancel
    return BargeIn(
        delay_s,
        cancelled_at - sent_at,
        max(0.0, last_audio - sent_at),
        max(0.0, playback_ends - sent_at),
        after_cancelled,
    )


async def _unless_failed(waiting: Coroutine[Any, Any, object], reader: asyncio.Task[None]) -> None:
    """Await ``waiting``, but re-raise at once if the reader fails meanwhile."""
    wait_task = asyncio.ensure_future(waiting)
    await asyncio.wait([wait_task, reader], return_when=asyncio.FIRST_COMPLETED)
    if not wait_task.done():
        wait_task.cancel()
        reader.result()  # raises the reader's error
        raise UpstreamError("the session ended before the awaited message")


async def run_barge_ins(
    base_url: str, answer: str, voice: str, runs: int, seed: int, each: Callable[[], object] = lambda: None
) -> list[BargeIn]:
    """``runs`` barge-ins, one after another on one session, with seeded random cancel delays."""
    rng = random.Random(seed)
    client = await connect(stream_url(base_url, voice=voice))
    results: list[BargeIn] = []
    try:
        for _ in range(runs):
            results.append(await barge_in(client, answer, rng.uniform(*CANCEL_DELAY_S)))
            each()
        return results
    finally:
        await client.aclose()
