"""The Wyoming server through the real model, where the audio is the point: the PCM's format and length,
what an offline ASR hears in English and in Japanese (another language family, chosen by language alone),
and a streamed answer heard while the LLM is still writing it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from koe.agent.replay import tokenize
from live_server import LOOPBACK, LiveServer, ServerFactory
from support import Transcriber, words
from support.asr import MultilingualTranscriber, character_error_rate
from ws_events import WAIT_S, run

ENGLISH = "The quick brown fox jumps over the lazy dog."
JAPANESE = "今日はとても良い天気ですね。"
#: An assistant's answer, long enough that an LLM at TOKENS_PER_S is still writing when the first clause
#: is heard.
ANSWER = (
    "Sure, I turned the kitchen lights off. The living room lamp is still on at half brightness, "
    "and the thermostat is set to twenty one degrees for the evening. Tell me if you want anything else."
)
TOKENS_PER_S = 30.0
#: Kokoro speaks English at ~15 characters a second; the audio must be of that order, not a fragment or a
#: runaway.
CHARS_PER_S = (8.0, 25.0)
MAX_CER = 0.10


@pytest.fixture(scope="module")
def live(serve_app: ServerFactory) -> Iterator[LiveServer]:
    with serve_app(wyoming_port=0) as server:
        yield server


@pytest.fixture(scope="module")
def asr() -> MultilingualTranscriber:
    return MultilingualTranscriber()


def connect(live: LiveServer) -> AsyncTcpClient:
    return AsyncTcpClient(LOOPBACK, live.app.state.wyoming.port, read_timeout=WAIT_S)


async def until(c: AsyncTcpClient, last: str) -> list[Event]:
    events = []
    while (event := await c.read_event()) is not None:
        assert event.type != "error", event.data
        events.append(event)
        if event.type == last:
            return events
    raise AssertionError(f"the connection closed before {last}")


def decoded(events: list[Event]) -> np.ndarray:
    """The answer's PCM as float samples, after checking every event says 24 kHz, 16 bits, mono."""
    start = AudioStart.from_event(events[0])
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    assert {(start.rate, start.width, start.channels)} | {(c.rate, c.width, c.channels) for c in chunks} == {
        (24_000, 2, 1)
    }
    return np.frombuffer(b"".join(c.audio for c in chunks), dtype="<i2").astype(np.float32) / 32768


def test_an_english_sentence_is_heard_as_written(live: LiveServer, transcribe: Transcriber) -> None:
    async def main() -> list[Event]:
        async with connect(live) as c:
            await c.write_event(Synthesize(text=ENGLISH, voice=SynthesizeVoice(name="af_heart")).event())
            return await until(c, "audio-stop")

    pcm = decoded(run(main))
    seconds = len(pcm) / 24_000
    assert len(ENGLISH) / CHARS_PER_S[1] < seconds < len(ENGLISH) / CHARS_PER_S[0]
    assert words(transcribe(pcm)) == words(ENGLISH)


def test_japanese_streamed_to_a_voice_chosen_by_language_is_heard_as_written(
    live: LiveServer, asr: MultilingualTranscriber
) -> None:
    async def main() -> list[Event]:
        async with connect(live) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(language="ja-JP")).event())
            for token in JAPANESE:  # an LLM writes Japanese a character or two at a time
                await c.write_event(SynthesizeChunk(text=token).event())
                await asyncio.sleep(1 / TOKENS_PER_S)
            await c.write_event(Synthesize(text=JAPANESE).event())
            await c.write_event(SynthesizeStop().event())
            return await until(c, "synthesize-stopped")

    heard = asr(decoded(run(main)), "ja")
    assert character_error_rate(JAPANESE, heard, "ja") <= MAX_CER, heard


def test_a_streamed_answer_is_heard_while_the_llm_is_still_writing(live: LiveServer) -> None:
    tokens = tokenize(ANSWER)
    first_clause = ANSWER.index(",") + 1
    sent: dict[str, float] = {}

    async def write(c: AsyncTcpClient) -> None:
        await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        written = 0
        for token in tokens:
            await c.write_event(SynthesizeChunk(text=token).event())
            written += len(token)
            if written >= first_clause:
                sent.setdefault("first clause", time.monotonic())
            await asyncio.sleep(1 / TOKENS_PER_S)
        sent["last token"] = time.monotonic()
        await c.write_event(Synthesize(text=ANSWER).event())
        await c.write_event(SynthesizeStop().event())

    async def main() -> tuple[float, list[Event]]:
        async with connect(live) as c:
            writing = asyncio.create_task(write(c))
            events = [await c.read_event() for _ in range(2)]  # audio-start, the first audio-chunk
            heard_at = time.monotonic()
            events += await until(c, "synthesize-stopped")
            await writing
            return heard_at, [e for e in events if e is not None]

    heard_at, events = run(main)
    assert AudioChunk.is_type(events[1].type)
    assert sent["first clause"] < heard_at < sent["last token"]
    pcm = decoded(events)
    assert len(ANSWER) / CHARS_PER_S[1] < len(pcm) / 24_000 < len(ANSWER) / CHARS_PER_S[0]
