"""``StreamClient`` over a real WebSocket: speech through the real model, the session logic on the fake."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import numpy as np
import pytest

from koe.client.session import StreamClient
from koe.client.websocket import connect, stream_url
from koe.engine.timing import FRAME_SAMPLES
from koe.engine.vocab import tokenize
from koe.errors import UpstreamError
from live_server import LiveServer, ServerFactory
from support import Transcriber, words
from support.fake import FRAMES_PER_TOKEN, FakeEngine, fake_seconds, fake_speech

SAMPLE_RATE = 24_000


def pcm_seconds(chunks: list[bytes]) -> float:
    return sum(len(c) for c in chunks) / 2 / SAMPLE_RATE


async def tokens(text: str) -> AsyncIterator[str]:
    """An LLM's output: word by word, with the event loop free in between."""
    for word in text.split(" "):
        await asyncio.sleep(0)
        yield word + " "


async def open_client(server: LiveServer) -> StreamClient:
    return await connect(stream_url(server.http_url, voice="af_heart", format="pcm"))


def test_stream_speaks_the_streamed_text(koe_server: LiveServer, transcribe: Transcriber) -> None:
    async def main() -> list[bytes]:
        client = await open_client(koe_server)
        try:
            return [chunk async for chunk in client.stream(tokens("Please call Stella."))]
        finally:
            await client.aclose()

    chunks = asyncio.run(main())
    audio = np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float32) / 32768
    assert 0.5 < pcm_seconds(chunks) < 4
    assert words(transcribe(audio))[:3] == ["please", "call", "stella"]


def test_a_session_speaks_turn_after_turn_from_plain_iterables(fake_server: LiveServer) -> None:
    async def main() -> list[float]:
        client = await open_client(fake_server)
        try:
            first = pcm_seconds([c async for c in client.stream(["Yes."])])
            await client.cancel()  # between turns: its reply must not end the next turn
            return [first, pcm_seconds([c async for c in client.stream(["Yes."])])]
        finally:
            await client.aclose()

    first, second = asyncio.run(main())
    assert first == second == pytest.approx(fake_seconds("Yes."))


def test_cancel_ends_the_turn_early_and_the_session_goes_on(serve_fake: ServerFactory) -> None:
    long_text = (
        "This is a long answer. It goes on and on. It has many sentences. Nobody wants to hear it all."
    )
    later = threading.Event()  # synthesis after the first call waits until the cancel has ended the turn
    engine = FakeEngine(gate=later, gate_after=1)

    async def main() -> tuple[float, float]:
        with serve_fake(engine) as live:
            client = await open_client(live)
            try:
                heard: list[bytes] = []
                async for chunk in client.stream(tokens(long_text)):
                    heard.append(chunk)
                    if len(heard) == 1:
                        await client.cancel()  # barge-in at the first audio
                later.set()  # opened once the server has answered the cancel (under load, opening it
                # as the cancel was sent let the held decode finish and be sent before it was read)
                after = [c async for c in client.stream(["Okay."])]
                return pcm_seconds(heard), pcm_seconds(after)
            finally:
                await client.aclose()

    heard_s, after_s = asyncio.run(main())
    # the first segment is the first sentence, or more where the text came faster than it was cut
    first_segment_s = (len(tokenize(engine.worked[0])) * FRAMES_PER_TOKEN + 2) * FRAME_SAMPLES / SAMPLE_RATE
    assert 0 < heard_s <= first_segment_s < fake_seconds(long_text)  # nothing after it was heard
    assert after_s == pytest.approx(fake_speech().synthesize("Okay.").size / SAMPLE_RATE)


def test_a_failing_text_source_cancels_the_turn_and_raises_its_error(fake_server: LiveServer) -> None:
    async def broken() -> AsyncIterator[str]:
        yield "Half a sentence"
        raise RuntimeError("the LLM went away")

    async def main() -> float:
        client = await open_client(fake_server)
        try:
            with pytest.raises(RuntimeError, match="the LLM went away"):
                async for _ in client.stream(broken()):
                    pass
            return pcm_seconds([c async for c in client.stream(["Still here."])])
        finally:
            await client.aclose()

    assert asyncio.run(main()) == pytest.approx(fake_seconds("Still here."))


def test_server_errors_surface_with_their_code(fake_server: LiveServer) -> None:
    async def main() -> None:
        client = await open_client(fake_server)
        try:
            await client.configure(voice="xx_nobody")
            with pytest.raises(UpstreamError) as caught:
                async for _ in client.stream(["Hello."]):
                    pass
            assert caught.value.code == "unknown_voice"
        finally:
            await client.aclose()

    asyncio.run(main())


def test_connecting_to_nothing_is_an_upstream_error() -> None:
    async def main() -> None:
        await connect("ws://127.0.0.1:9/v1/stream", open_timeout_s=2)

    with pytest.raises(UpstreamError, match="cannot open a TTS session"):
        asyncio.run(main())
