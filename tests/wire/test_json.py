"""The one JSON-object parser every transport reads its messages and bodies with."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from koe.errors import KoeError, LimitError, ProtocolError
from koe.wire.json import MAX_DEPTH, parse_object


def test_an_object_is_parsed_from_text_or_utf8_bytes() -> None:
    assert parse_object('{"a": [1, {"b": "é"}]}', max_bytes=100) == {"a": [1, {"b": "é"}]}
    assert parse_object('{"a": "é"}'.encode(), max_bytes=100) == {"a": "é"}


@pytest.mark.parametrize(
    ("data", "error", "code"),
    [
        ('{"a": "' + "x" * 100 + '"}', LimitError, "message_too_large"),
        (b"\xff\xfe{}", ProtocolError, "invalid_json"),
        ("{oops", ProtocolError, "invalid_json"),
        ('{"speed": NaN}', ProtocolError, "invalid_json"),
        ('{"speed": -Infinity}', ProtocolError, "invalid_json"),
        ("[1, 2]", ProtocolError, "invalid_message"),
        ('"text"', ProtocolError, "invalid_message"),
        ("null", ProtocolError, "invalid_message"),
    ],
)
def test_bad_input_gets_its_code(data: str | bytes, error: type[KoeError], code: str) -> None:
    with pytest.raises(error) as raised:
        parse_object(data, max_bytes=64)
    assert raised.value.code == code


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 10_000, 100_000])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "unclosed"])
def test_nesting_deeper_than_any_message_is_refused_before_the_recursive_parser(
    levels: int, closed: bool
) -> None:
    data = '{"type": "config", "x": ' + "[" * levels + ("]" * levels + "}" if closed else "")
    with pytest.raises(ProtocolError, match=f"at most {MAX_DEPTH} levels") as raised:
        parse_object(data, max_bytes=None)
    assert raised.value.code == "invalid_json"


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = '{"text": "' + "[{" * 1000 + '\\" still a string ]]"}'
    assert parse_object(text, max_bytes=None)["text"].startswith("[{[{")


def test_nesting_up_to_the_limit_is_parsed() -> None:
    data = '{"a": ' + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "}"
    assert parse_object(data, max_bytes=None)["a"]


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3),
        max_leaves=20,
    )
)
def test_any_shallow_json_value_in_an_object_round_trips(value: object) -> None:
    assume(_depth(value) < MAX_DEPTH)
    assert parse_object(json.dumps({"v": value}), max_bytes=None) == {"v": value}


def _depth(value: object) -> int:
    return 1 + max(map(_depth, value), default=0) if isinstance(value, list) else 0


@pytest.mark.parametrize(
    "data",
    [
        '{"text": "' + '\\"' * 30_000,  # an unclosed string of escaped quotes: each one could restart a scan
        '{"text": "' + '\\"' * 30_000 + "\\",  # ... ending in a lone backslash
        '{"a": "' + '"' * 30_000,  # every quote opens or closes a string
    ],
    ids=["escaped-quotes", "trailing-backslash", "bare-quotes"],
)
def test_unclosed_strings_are_refused_in_one_pass(data: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_object(data, max_bytes=None)
    assert raised.value.code == "invalid_json"


@pytest.mark.parametrize(
    "data",
    [
        '{"text": "\\ud800"}',
        '{"text": "ok \\udfff"}',
        '{"\\ud83d": 1}',  # a key
        '{"a": ["x", {"b": "\\ud83d\\u0041"}]}',  # a high surrogate followed by something else
    ],
)
def test_lone_surrogate_escapes_are_refused_anywhere(data: str) -> None:
    with pytest.raises(ProtocolError, match="surrogate") as raised:
        parse_object(data, max_bytes=None)
    assert raised.value.code == "invalid_json"


def test_a_surrogate_pair_is_one_character_and_nul_is_carried() -> None:
    assert parse_object('{"text": "\\ud83d\\ude00 \\u0000"}', max_bytes=None) == {"text": "😀 \x00"}
