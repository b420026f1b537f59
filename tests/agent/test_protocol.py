"""The agent's requests, parsed without I/O: browser frames and invocation bodies."""

from __future__ import annotations

import json

import pytest

from koe.agent.protocol import Ask, Interrupt, Read, parse_invocation, parse_message
from koe.agent.replay import ReplayPace
from koe.errors import KoeError

LIMIT = 10_000


def test_ask_read_and_interrupt_are_parsed() -> None:
    assert parse_message(
        '{"type":"ask","prompt":"Hi?","voice":"af_sky","speed":1.2}', max_bytes=LIMIT
    ) == Ask("Hi?", "af_sky", 1.2)
    read = parse_message(b'{"type":"read","text":"Hello.","tokens_per_s":12}', max_bytes=LIMIT)
    assert read == Read("Hello.", ReplayPace(12.0, 0.3), None, 1.0)
    assert parse_message('{"type":"interrupt"}', max_bytes=LIMIT) == Interrupt(None)
    assert parse_message('{"type":"interrupt","heard_segments":2}', max_bytes=LIMIT) == Interrupt(2)


def test_an_invocation_body_names_its_mode_and_session() -> None:
    request, session = parse_invocation(b'{"prompt":"Why?","session_id":"abc"}', None, max_bytes=LIMIT)
    assert (request, session) == (Ask("Why?"), "abc")
    request, session = parse_invocation(b'{"read":"Text.","first_token_delay_s":0}', None, max_bytes=LIMIT)
    assert (request, session) == (Read("Text.", ReplayPace(30.0, 0.0)), None)


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        ("[1]", "invalid_message"),
        ('{"type":"shout"}', "invalid_message"),
        ('{"type":"ask"}', "invalid_field"),
        ('{"type":"ask","prompt":"  "}', "invalid_field"),
        ('{"type":"ask","prompt":"Hi","speed":9}', "invalid_field"),
        ('{"type":"ask","prompt":"Hi","voice":7}', "invalid_field"),
        ('{"type":"read","text":"Hi","tokens_per_s":"fast"}', "invalid_field"),
        ('{"type":"read","text":"Hi","tokens_per_s":0}', "invalid_field"),
        ('{"type":"interrupt","heard_segments":-1}', "invalid_field"),
        ('{"type":"interrupt","heard_segments":true}', "invalid_field"),
        (json.dumps({"type": "ask", "prompt": "x" * LIMIT}), "message_too_large"),
    ],
)
def test_bad_frames_get_a_named_error(frame: str, code: str) -> None:
    with pytest.raises(KoeError) as caught:
        parse_message(frame, max_bytes=LIMIT)
    assert caught.value.code == code


@pytest.mark.parametrize(
    "body",
    [
        b'{"prompt":"a","read":"b"}',
        b"{}",
        b'{"prompt":"a","session_id":""}',
        b'{"prompt":"a","session_id":"\\n"}',
    ],
)
def test_bad_invocation_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(KoeError) as caught:
        parse_invocation(body, None, max_bytes=LIMIT)
    assert caught.value.code in {"invalid_message", "invalid_field"}
