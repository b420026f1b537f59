"""The client's side of the protocol without I/O: any reply decodes to what the server encoded, and any
request encodes to what the server parses back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.audio.formats import SUPPORTED_SAMPLE_RATES
from koe.client.websocket import stream_url
from koe.errors import ConfigError, ProtocolError
from koe.server.protocol import parse_message
from koe.wire.fields import STREAM_FORMATS
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
    Words,
    decode,
    encode,
    encode_request,
)
from koe.wire.params import LANGS, MAX_SPEED, MIN_SPEED
from koe.wire.words import SpokenWord

INT64 = st.integers(-(2**63), 2**63 - 1)
NUMBERS = st.floats(allow_nan=False, allow_infinity=False)
REQUEST_IDS = st.one_of(st.text(max_size=20), INT64)
WORDS = st.builds(SpokenWord, st.text(), NUMBERS, NUMBERS, st.tuples(INT64, INT64))
#: Every reply of koe's dialect, with any values its fields' types allow.
REPLIES = st.one_of(
    st.builds(ConfigAck, st.text(), st.text(), NUMBERS, INT64, st.text(), st.text()),
    st.builds(SegmentStart, INT64, INT64, st.text(), st.tuples(INT64, INT64)),
    st.builds(Words, INT64, INT64, st.lists(WORDS, max_size=4).map(tuple)),
    st.builds(SegmentEnd, INT64, INT64, NUMBERS),
    st.builds(Flushed, INT64, NUMBERS, st.none() | NUMBERS),
    st.builds(Cancelled, INT64),
    st.builds(Error, st.text(), st.text(), st.none() | NUMBERS),
    st.builds(SynthesisStart, REQUEST_IDS),
    st.builds(SynthesisComplete, REQUEST_IDS, NUMBERS, NUMBERS),
)


@given(REPLIES)
def test_every_server_message_decodes_to_what_was_encoded(message: ServerMessage) -> None:
    assert decode(encode(message)) == message


def test_the_aws_completion_carries_each_figure_under_both_names() -> None:
    sent = json.loads(encode(SynthesisComplete(7, 1.5, 2.25)))
    assert (sent["duration_seconds"], sent["elapsed_seconds"]) == (1.5, 2.25)


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


#: Every request of koe's dialect, with values the server accepts (they come back as the server reads them).
OPTIONS = st.builds(
    SessionOptions,
    voice=st.none() | st.text(min_size=1, max_size=40).filter(lambda v: v == v.strip() and v != ""),
    speed=st.none() | st.floats(MIN_SPEED, MAX_SPEED),
    sample_rate=st.none() | st.sampled_from(SUPPORTED_SAMPLE_RATES),
    format=st.none() | st.sampled_from(list(STREAM_FORMATS)),
    lang=st.none() | st.sampled_from(LANGS),
    words=st.none() | st.booleans(),
)
REQUESTS = st.one_of(
    st.builds(Append, st.text(max_size=200), st.just(Dialect.KOE)),
    st.sampled_from([Flush(Dialect.KOE), Cancel(Dialect.KOE), Close(Dialect.KOE)]),
    st.builds(Configure, OPTIONS),
    st.builds(Request, st.text(max_size=200), OPTIONS, st.none() | REQUEST_IDS),
)


@given(REQUESTS)
def test_every_request_parses_back_on_the_server_as_itself(message: ClientMessage) -> None:
    assert parse_message(encode_request(message), max_bytes=1 << 20, max_chars=4096) == message
