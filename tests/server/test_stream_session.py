"""koe's own streaming protocol against a live server: config, append, flush, cancel, close.

The protocol runs on the scripted fake engine (milliseconds a turn); two concurrent sessions are also heard
through the real model, where intelligible audio for each is the point."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_checks import wait_for
from live_server import LiveServer, ServerFactory
from support import Transcriber, words
from support.fake import FakeEngine
from ws_events import Event, audio, messages, of_type, receive, run, send, shape, until

PCM_BYTES_PER_S = 24_000 * 2


@pytest.mark.parametrize("binary", [False, True], ids=["text-frames", "binary-frames"])
def test_a_turn_streams_segment_audio_and_flushed_in_order(fake_server: LiveServer, binary: bool) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            await send(ws, {"type": "config", "voice": "af_sky"}, binary=binary)
            ack = await receive(ws)
            assert isinstance(ack, dict)
            assert {k: ack[k] for k in ("type", "voice", "speed", "sample_rate", "format", "lang")} == {
                "type": "config",
                "voice": "af_sky",
                "speed": 1.0,
                "sample_rate": 24000,
                "format": "pcm_s16le",
                "lang": "en-us",
            }
            assert isinstance(ack["session"], str) and ack["session"]
            await send(ws, {"type": "append", "text": "Hello there. "}, binary=binary)
            await send(ws, {"type": "append", "text": "How are you today?"}, binary=binary)
            await send(ws, {"type": "flush"}, binary=binary)
            events = await until(ws, of_type("flushed"))

        kinds = shape(events)
        assert kinds[-1] == "flushed"
        assert kinds[:-1] == ["segment", "words", "audio", "segment_end"] * (len(kinds[:-1]) // 4)
        segments = [m for m in messages(events) if m["type"] == "segment"]
        ends = [m for m in messages(events) if m["type"] == "segment_end"]
        assert [s["index"] for s in segments] == list(range(len(segments))) == [e["index"] for e in ends]
        assert {s["turn"] for s in segments} == {0}
        text = "Hello there. How are you today?"
        assert " ".join(s["text"] for s in segments) == text
        for s in segments:
            a, b = s["source_span"]
            assert text[a:b] == s["text"]
        frames = [e for e in events if isinstance(e, bytes)]
        assert all(0 < len(f) <= PCM_BYTES_PER_S // 10 and len(f) % 2 == 0 for f in frames)  # ≤ 100 ms
        flushed = events[-1]
        assert isinstance(flushed, dict)
        assert flushed["turn"] == 0
        assert flushed["audio_s"] == pytest.approx(sum(e["duration_s"] for e in ends), abs=0.01)
        assert len(audio(events)) / PCM_BYTES_PER_S == pytest.approx(flushed["audio_s"], abs=0.01)
        assert flushed["ttfa_ms"] > 0

    run(main)


def test_query_parameters_configure_the_session(fake_server: LiveServer) -> None:
    async def main() -> None:
        url = fake_server.ws_url + "/v1/stream?voice=bf_emma&speed=1.2&sample_rate=16000&format=mulaw"
        async with connect(url) as ws:
            await send(ws, {"type": "config"})
            ack = await receive(ws)
            await send(ws, {"type": "append", "text": "Good morning."})
            await send(ws, {"type": "flush"})
            events = await until(ws, of_type("flushed"))
        assert isinstance(ack, dict)
        assert (ack["voice"], ack["speed"], ack["sample_rate"], ack["format"], ack["lang"]) == (
            "bf_emma",
            1.2,
            16000,
            "mulaw",
            "en-gb",
        )
        frames = [e for e in events if isinstance(e, bytes)]
        assert all(len(f) <= 1600 for f in frames)  # 100 ms of 8-bit samples at 16 kHz
        flushed = messages(events)[-1]
        assert len(audio(events)) / 16000 == pytest.approx(flushed["audio_s"], abs=0.01)

    run(main)


def test_nothing_is_sent_on_connect(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "flush"})  # an empty turn: the first thing back is its reply
            assert await receive(ws) == {"type": "flushed", "turn": 0, "audio_s": 0.0, "ttfa_ms": None}

    run(main)


def test_token_streaming_gets_the_first_segment_before_the_flush(fake_server: LiveServer) -> None:
    answer = "Sure, I can help with that. The weather today is sunny and warm."

    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            for token in answer.split(" "):
                await send(ws, {"type": "append", "text": token + " "})
            first = await receive(ws)  # no flush sent yet
            assert isinstance(first, dict) and first["type"] == "segment" and first["index"] == 0
            assert answer.startswith(first["text"])
            await send(ws, {"type": "flush"})
            rest = await until(ws, of_type("flushed"))
        spoken = [first["text"]] + [m["text"] for m in messages(rest) if m["type"] == "segment"]
        assert " ".join(spoken) == answer

    run(main)


def test_the_first_audio_arrives_while_later_sentences_are_still_to_be_synthesized(
    serve_fake: ServerFactory,
) -> None:
    text = "The first sentence is here. The second sentence is here. The third sentence is here."
    later = threading.Event()  # every synthesis after the first waits for it
    engine = FakeEngine(gate=later, gate_after=1)

    async def main() -> None:
        with serve_fake(engine) as live:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": text})
                await send(ws, {"type": "flush"})
                head = await until(ws, of_type("words"))
                assert isinstance(await receive(ws), bytes)  # heard while the rest cannot be synthesized
                assert engine.calls <= 2 and not later.is_set()
                later.set()
                rest = await until(ws, of_type("flushed"))
        segments = [m for m in messages(head + rest) if m["type"] == "segment"]
        assert len(segments) >= 2 and " ".join(s["text"] for s in segments) == text

    run(main)


def test_cancel_stops_the_turn_at_once_and_the_next_turn_works(fake_server: LiveServer) -> None:
    long_text = "This answer is long. " * 6

    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": long_text})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("words"))
            assert isinstance(await receive(ws), bytes)  # audio is flowing
            await send(ws, {"type": "cancel"})
            await until(ws, of_type("cancelled"))  # audio already on the wire may precede it
            await send(ws, {"type": "append", "text": "Okay."})
            await send(ws, {"type": "flush"})
            after = await until(ws, of_type("flushed"))
        assert shape(after) == ["segment", "words", "audio", "segment_end", "flushed"]
        assert {m["turn"] for m in messages(after)} == {1}

    run(main)


def test_a_cancel_stops_the_engines_decode_in_progress_without_waiting_for_it(
    serve_fake: ServerFactory,
) -> None:
    """The segment's decode is held until its gate opens, which never happens: only the turn's cancel
    reaching the engine's run in progress can end it (a held worker would keep the next turn waiting)."""
    gate = threading.Event()
    engine = FakeEngine(gate=gate)

    async def main(live: LiveServer) -> list[Event]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": "This is held in the engine."})
            await send(ws, {"type": "flush"})
            await asyncio.to_thread(_until, lambda: engine.calls == 1)  # its first audio is held
            await send(ws, {"type": "cancel"})
            await until(ws, of_type("cancelled"))
            await asyncio.to_thread(_until, lambda: engine.stopped == 1)
            gate.set()  # the next turn speaks
            await send(ws, {"type": "append", "text": "Okay."})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    with serve_fake(engine=engine, workers=1) as live:
        after = run(lambda: main(live))
    assert shape(after)[-1] == "flushed" and engine.stopped == 1


def _until(condition: Callable[[], bool]) -> None:
    wait_for(condition, "the engine's call")


def test_cancel_replies_even_with_nothing_to_cancel_and_each_reply_ends_a_turn(
    fake_server: LiveServer,
) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "cancel"})
            assert await receive(ws) == {"type": "cancelled", "turn": 0}
            await send(ws, {"type": "flush"})
            assert await receive(ws) == {"type": "flushed", "turn": 1, "audio_s": 0.0, "ttfa_ms": None}

    run(main)


def test_close_speaks_what_is_pending_then_closes_normally(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": "Goodbye now."})
            await send(ws, {"type": "close"})
            events = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    events.append(await receive(ws))
        assert shape(events) == ["segment", "words", "audio", "segment_end", "flushed"]
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000

    run(main)


def test_two_sessions_at_once_both_complete_in_order_with_their_own_words(
    koe_server: LiveServer, transcribe: Transcriber
) -> None:
    texts = {
        "af_sky": "The red car is fast. It drives away.",
        "am_echo": "Green apples taste sour. I like them.",
    }

    async def session(voice: str, text: str) -> list[Event]:
        async with connect(koe_server.ws_url + f"/v1/stream?voice={voice}") as ws:
            await send(ws, {"type": "append", "text": text})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    async def main() -> list[list[Event]]:
        return list(await asyncio.gather(*(session(voice, text) for voice, text in texts.items())))

    for events, text in zip(run(main), texts.values(), strict=True):
        segments = [m for m in messages(events) if m["type"] == "segment"]
        assert [s["index"] for s in segments] == list(range(len(segments)))
        assert " ".join(s["text"] for s in segments) == text
        pcm = np.frombuffer(audio(events), dtype="<i2").astype(np.float32) / 32768
        assert words(transcribe(pcm)) == words(text)
