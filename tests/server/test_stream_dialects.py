"""The AWS sample's message and Deepgram-style messages, exactly as their clients expect them."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_server import LiveServer
from ws_events import audio, messages, of_type, receive, run, send, shape, until


@pytest.mark.parametrize("binary", [False, True], ids=["text-frames", "binary-frames"])
def test_the_aws_sample_request_gets_start_audio_complete(fake_server: LiveServer, binary: bool) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            request = {
                "text": "Hello there. Nice to meet you.",
                "voice": "am_echo",
                "sample_rate": 16000,
                "request_id": "req-1",
            }
            await send(ws, request, binary=binary)
            events = await until(ws, of_type("synthesis_complete"))
        assert shape(events) == ["synthesis_start", "audio", "synthesis_complete"]
        assert events[0] == {"type": "synthesis_start", "request_id": "req-1"}
        complete = events[-1]
        assert isinstance(complete, dict)
        assert set(complete) == {
            "type", "request_id", "total_duration_s", "elapsed_s", "duration_seconds", "elapsed_seconds"
        }  # fmt: skip
        assert complete["request_id"] == "req-1"
        assert complete["duration_seconds"] == complete["total_duration_s"]  # the sample client's names
        assert complete["elapsed_seconds"] == complete["elapsed_s"]
        assert len(audio(events)) / (16000 * 2) == pytest.approx(complete["total_duration_s"], abs=0.01)
        assert complete["elapsed_s"] > 0

    run(main)


def test_aws_requests_without_an_id_get_one_and_stay_pcm16_in_a_mulaw_session(
    fake_server: LiveServer,
) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream?format=mulaw") as ws:
            await send(ws, {"text": "Hi."})
            events = await until(ws, of_type("synthesis_complete"))
        start, complete = messages(events)
        assert start["request_id"] == complete["request_id"] and start["request_id"]
        assert len(audio(events)) / (24000 * 2) == pytest.approx(complete["total_duration_s"], abs=0.01)

    run(main)


def test_deepgram_style_speak_flush_clear_close(fake_server: LiveServer) -> None:
    async def main() -> None:
        url = fake_server.ws_url + "/v1/speak?model=aura-2-helena-en&encoding=linear16&sample_rate=16000"
        async with connect(url) as ws:
            await send(ws, {"type": "Speak", "text": "Hello from the agent."})
            await send(ws, {"type": "Flush"})
            first = await until(ws, of_type("Flushed"))
            await send(ws, {"type": "Speak", "text": "This will be interrupted."})
            await send(ws, {"type": "Clear"})
            cleared = await until(ws, of_type("Cleared"))
            await send(ws, {"type": "Close"})
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert shape(first) == ["audio", "Flushed"]
        assert first[-1] == {"type": "Flushed", "sequence_id": 0}
        assert len(audio(first)) % 2 == 0 and len(audio(first)) > 16000  # > 0.5 s of 16 kHz PCM16
        assert cleared[-1] == {"type": "Cleared", "sequence_id": 1}
        assert not messages(cleared)[:-1]  # Deepgram clients get audio and their own replies only
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000

    run(main)
