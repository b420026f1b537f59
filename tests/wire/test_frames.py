"""koe's plain requests read by their schema say what the validating parser says of the same frame, for any
frame: a frame the schema takes holds exactly what :func:`parse_object` reads from it."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from koe.wire.json import parse_object
from koe.wire.messages import decode_frame

KEYS = st.sampled_from(["type", "text", "voice", "Type", ""])
TYPES = st.sampled_from(["append", "flush", "cancel", "close", "Speak", "config", "APPEND"])
#: Values of every JSON kind, with lone surrogates (which only the escaped spelling can carry as bytes).
SURROGATES = st.sampled_from(["\ud800", "a\udfff"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | SURROGATES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
#: Members in order, duplicates allowed: JSON text that ``json.dumps`` of a dict could never write.
MEMBERS = st.lists(st.tuples(KEYS, st.one_of(TYPES, VALUES)), max_size=4)


def _frame(members: list[tuple[str, object]], ascii_only: bool) -> str:
    body = ",".join(f"{json.dumps(k)}:{json.dumps(v, ensure_ascii=ascii_only)}" for k, v in members)
    return "{" + body + "}"


@given(MEMBERS, st.booleans(), st.booleans())
def test_a_frame_read_by_its_schema_holds_what_the_validating_parser_reads(
    members: list[tuple[str, object]], ascii_only: bool, as_bytes: bool
) -> None:
    text = _frame(members, ascii_only)
    try:
        data: str | bytes = text.encode() if as_bytes else text
    except UnicodeEncodeError:  # a raw lone surrogate has no UTF-8 bytes; it can still come as a str
        data = text
    frame = decode_frame(data)
    if frame is not None:
        assert parse_object(data, max_bytes=None) == msgspec.to_builtins(frame)


def test_another_field_a_lone_surrogate_or_deep_nesting_is_left_to_the_validating_parser() -> None:
    assert decode_frame('{"type":"append","text":"hi","voice":"af_sky"}') is None
    assert decode_frame('{"type":"append","text":"\\ud800"}') is None
    assert decode_frame('{"type":"append","text":' + "[" * 100_000) is None
    assert decode_frame('{"type":"append","text":"hi"}') is not None
