"""A server on the PyTorch engine (CPU, weights derived from the int8 model): four sessions at once share
engine calls, and each still hears its own sentence, whole."""

from __future__ import annotations

import asyncio

import numpy as np
from websockets.asyncio.client import connect

from koe.pipeline.speech import Speech
from koe.settings import Settings
from live_checks import metric
from live_server import LOOPBACK, run_server
from support import Transcriber, word_error_rate
from support.warm import warm_app
from ws_events import Event, audio, messages, of_type, run, send, until

SENTENCES = ("Good morning to you.", "The blue car is ready.", "Please close the door.", "We leave at noon.")
#: tiny.en may mishear one word of a short sentence; whole audio from the wrong session would miss all.
MAX_WER = 0.25


async def _turn(url: str, text: str) -> list[Event]:
    async with connect(url + "/v1/stream") as ws:
        await send(ws, {"type": "append", "text": text})
        await send(ws, {"type": "flush"})
        return await until(ws, of_type("flushed"))


def test_four_sessions_share_engine_calls_and_each_hears_its_own_sentence(
    torch_speech: Speech, transcribe: Transcriber
) -> None:
    settings = Settings(host=LOOPBACK, port=0, engine="torch", workers=2)
    with run_server(warm_app(settings, torch_speech), settings) as live:

        async def main() -> list[list[Event]]:
            return await asyncio.gather(*(_turn(live.ws_url, text) for text in SENTENCES))

        turns = run(main)
        calls = metric(live, "koe_batch_size_count")
        segments = metric(live, "koe_batch_size_sum")
    assert calls >= 1 and segments == len(SENTENCES) and segments / calls > 1  # batch size above 1
    for text, events in zip(SENTENCES, turns, strict=True):
        assert not [m for m in messages(events) if m["type"] == "error"]
        ended = [m for m in messages(events) if m["type"] == "segment_end"]
        pcm = np.frombuffer(audio(events), dtype="<i2").astype(np.float32) / 32767
        assert pcm.size == round(sum(m["duration_s"] for m in ended) * 24_000)  # every sample arrived
        assert word_error_rate(text, transcribe(pcm)) <= MAX_WER
