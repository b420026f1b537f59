"""The AWS sample's ``/invocations``: ``"transport": "sse"`` (start, base64 audio chunks, end with both
spellings of the totals) and null fields; on the fake engine, so the decoded audio's length is known
exactly."""

from __future__ import annotations

import base64
import io
import wave

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.wire.fields import MAX_REQUEST_ID_CHARS
from live_server import LiveServer
from sse_events import sse_events
from support.fake import fake_seconds
from ws_events import Event, receive, run, send

TEXT = "Hello there."


def invoke(server: LiveServer, **fields: object) -> httpx.Response:
    return httpx.post(server.http_url + "/invocations", json={"text": TEXT, "transport": "sse", **fields})


def test_sse_sends_start_chunks_and_end_with_pcm16_by_default(fake_server: LiveServer) -> None:
    response = invoke(fake_server, sample_rate=16000, request_id="r-9")
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    start, *chunks, end = events
    assert start == {"type": "audio_stream_start", "request_id": "r-9", "format": "pcm", "sample_rate": 16000}
    assert chunks and all(c["type"] == "audio_chunk" and c["request_id"] == "r-9" for c in chunks)
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    pcm = b"".join(base64.b64decode(c["audio"]) for c in chunks)
    assert len(pcm) == round(fake_seconds(TEXT) * 16000) * 2
    assert end["type"] == "audio_stream_end" and end["chunks"] == len(chunks)
    assert end["total_duration_s"] == end["duration_seconds"] == round(fake_seconds(TEXT), 3)
    assert end["elapsed_s"] == end["elapsed_seconds"] > 0


def test_sse_carries_the_asked_format(fake_server: LiveServer) -> None:
    chunks = [e for e in sse_events(invoke(fake_server, format="wav")) if e["type"] == "audio_chunk"]
    with wave.open(io.BytesIO(b"".join(base64.b64decode(c["audio"]) for c in chunks))) as wav:
        assert wav.getframerate() == 24000
    assert sse_events(invoke(fake_server))[0]["request_id"]  # an id is made when none is given


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"transport": "carrier-pigeon"}, "transport must be 'sse'"),
        ({"stream": False}, "stream must be true"),
    ],
)
def test_contradictory_or_unknown_transports_are_refused(
    fake_server: LiveServer, fields: dict[str, object], says: str
) -> None:
    response = invoke(fake_server, **fields)
    assert response.status_code == 400 and says in response.json()["message"]


def test_without_a_transport_the_body_is_the_audio_as_before(fake_server: LiveServer) -> None:
    response = httpx.post(fake_server.http_url + "/invocations", json={"text": TEXT, "format": "pcm"})
    assert response.headers["content-type"] == "audio/pcm"
    assert len(response.content) == round(fake_seconds(TEXT) * 24000) * 2


def test_null_optional_fields_mean_their_defaults(fake_server: LiveServer) -> None:
    nulls = {
        "voice": None,
        "speed": None,
        "format": None,
        "sample_rate": None,
        "stream": None,
        "transport": None,
    }
    response = httpx.post(fake_server.http_url + "/invocations", json={"text": TEXT, **nulls})
    assert response.status_code == 200, response.text
    with wave.open(io.BytesIO(response.content)) as wav:  # the defaults: WAV at 24 kHz
        assert wav.getframerate() == 24000
        assert len(wav.readframes(1 << 30)) == round(fake_seconds(TEXT) * 24000) * 2


def test_a_request_id_is_bounded_alike_over_http_and_the_websocket(fake_server: LiveServer) -> None:
    """An id echoed in every event must not multiply the response: 200 KB of id once made 206 KB of SSE
    1.8 MB. Both of the AWS sample's transports refuse one character over the limit the same way."""
    too_long = "r" * (MAX_REQUEST_ID_CHARS + 1)
    refused = invoke(fake_server, request_id=too_long)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_message")
    assert too_long not in refused.text

    async def over_the_socket() -> Event:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            await send(ws, {"text": TEXT, "request_id": too_long})
            return await receive(ws)

    error = run(over_the_socket)
    assert isinstance(error, dict) and (error["type"], error["code"]) == ("error", "invalid_message")
    at_the_limit = "r" * MAX_REQUEST_ID_CHARS
    assert {event["request_id"] for event in sse_events(invoke(fake_server, request_id=at_the_limit))} == {
        at_the_limit
    }
