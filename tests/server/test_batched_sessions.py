"""Sessions sharing engine calls, on a server whose (fake) engine shares passes: every session's audio is
its own, a segment that fails in a shared call fails alone, and ``/metrics`` shows the calls' sizes."""

from __future__ import annotations

import asyncio
import threading

from websockets.asyncio.client import connect

from koe.audio.pcm import to_pcm16
from live_checks import metric
from live_server import LiveServer, ServerFactory
from support.fake import FAIL_WORD, FakeEngine, fake_speech
from ws_events import WAIT_S, Event, audio, messages, of_type, run, send, until

TEXTS = ("Alpha one.", f"Bravo {FAIL_WORD} two.", "Charlie three.", "Delta four.")


async def _turn(url: str, text: str) -> list[Event]:
    async with connect(url + "/v1/stream") as ws:
        await send(ws, {"type": "append", "text": text})
        await send(ws, {"type": "flush"})
        return await until(ws, of_type("flushed"))


async def _queued(live: LiveServer, jobs: int) -> None:
    """Until ``jobs`` jobs wait in the server's queue (read from /metrics, as an operator would)."""
    async with asyncio.timeout(WAIT_S):
        while await asyncio.to_thread(metric, live, "koe_queue_depth") < jobs:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def _alone(text: str) -> bytes:
    """What the fake engine says for ``text`` alone, as the server sends it (16-bit PCM)."""
    return to_pcm16(fake_speech().synthesize(text, voice="af_heart"))


def test_sessions_share_calls_and_a_failing_segment_fails_alone(serve_fake: ServerFactory) -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate, max_batch=4, windowed=False)  # shares passes, never windows: as torch
    with serve_fake(engine=engine, workers=2, batch_window_s=0.0) as live:

        async def main() -> list[list[Event]]:
            first = asyncio.create_task(_turn(live.ws_url, TEXTS[0]))  # its call holds the engine
            while not engine.batches:  # noqa: ASYNC110 - the fake engine's record, set from its thread
                await asyncio.sleep(0.01)
            others = [asyncio.create_task(_turn(live.ws_url, text)) for text in TEXTS[1:]]
            await _queued(live, 3)  # prepared, waiting for the engine: they board one call
            gate.set()
            return await asyncio.gather(first, *others)

        turns = run(main)
        calls = metric(live, "koe_batch_size_count")
        segments = metric(live, "koe_batch_size_sum")
    assert engine.batches[:2] == [1, 3]  # A alone, then B, C, D in one call
    assert sorted(engine.batches[2:]) == [1, 1, 1]  # that call failed: each retried alone
    assert (calls, segments) == (2, 4)  # A's call, and B-C-D's (its retries ran inside it)
    for text, events in zip(TEXTS, turns, strict=True):
        errors = [m for m in messages(events) if m["type"] == "error"]
        if FAIL_WORD in text:
            assert [e["code"] for e in errors] == ["synthesis_failed"] and FAIL_WORD in errors[0]["message"]
            assert audio(events) == b""
        else:
            assert errors == [] and audio(events) == _alone(text)
