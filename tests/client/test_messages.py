"""The client's side of the protocol without I/O: replies decode to what the server encoded, and requests
encode to what the server parses back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.audio.formats import AudioFormat
from koe.client.messages import decode, encode_request
from koe.client.websocket import stream_url
from koe.errors import ConfigError, ProtocolError
from koe.server.protocol import parse_message
from koe.wire.messages import (
    Append,
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    ConfigAck,
    Configure,
    Dialect,
    Error,
    Flush,
    Flushed,
    Request,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SessionOptions,
    SynthesisComplete,
    SynthesisStart,
    encode,
)

MESSAGES: list[ServerMessage] = [
    ConfigAck("s1", "af_heart", 1.0, 24000, "pcm_s16le", "en-us"),
    SegmentStart(2, 0, "Hello there.", (0, 12)),
    SegmentEnd(2, 0, 0.84),
    Flushed(2, 0.84, 612.5),
    Flushed(3, 0.0, None),
    Cancelled(4),
    Error("queue_saturated", "full", 2.0),
    Error("invalid_json", "bad"),
    SynthesisStart("r1"),
    SynthesisComplete(7, 1.5, 2.25),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_server_message_decodes_to_what_was_encoded(message: ServerMessage) -> None:
    assert decode(encode(message)) == message


@pytest.mark.parametrize("frame", ["nope", "[]", '{"type":"Flushed","sequence_id":1}', '{"type":"flushed"}'])
def test_unreadable_or_unexpected_frames_are_protocol_errors(frame: str) -> None:
    with pytest.raises(ProtocolError):
        decode(frame)


def test_stream_urls_use_the_koe_path_unless_one_is_given() -> None:
    assert stream_url("http://tts:8080", voice="af_sky", speed=None) == "ws://tts:8080/v1/stream?voice=af_sky"
    assert stream_url("https://tts.example") == "wss://tts.example/v1/stream"
    assert stream_url("ws://tts:8080/invocations-bidirectional-stream") == (
        "ws://tts:8080/invocations-bidirectional-stream"
    )
    with pytest.raises(ConfigError):
        stream_url("tts:8080")


REQUESTS: list[ClientMessage] = [
    Append("Hello, world.", Dialect.KOE),
    Append("", Dialect.KOE),
    Flush(Dialect.KOE),
    Cancel(Dialect.KOE),
    Close(Dialect.KOE),
    Configure(SessionOptions(voice="af_bella(2)+af_sky", speed=1.25, sample_rate=16000)),
    Configure(SessionOptions(format=AudioFormat.MULAW, lang="en-gb")),
    Configure(SessionOptions()),
    Request("Whole text.", SessionOptions(voice="bm_lewis"), "r-7"),
    Request("No id.", SessionOptions(), None),
]


@pytest.mark.parametrize("message", REQUESTS, ids=lambda m: type(m).__name__)
def test_every_request_parses_back_on_the_server_as_itself(message: ClientMessage) -> None:
    assert parse_message(encode_request(message), max_bytes=1 << 16, max_chars=4096) == message


@given(st.text(max_size=200))
def test_any_appended_text_arrives_unchanged(text: str) -> None:
    message = Append(text, Dialect.KOE)
    assert parse_message(encode_request(message), max_bytes=1 << 20, max_chars=4096) == message
