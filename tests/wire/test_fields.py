"""Field validators: a bad value of any size or type is refused with ``invalid_field``, named, bounded."""

from __future__ import annotations

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.errors import ConfigError, ProtocolError
from koe.wire.fields import (
    MAX_LANG_CHARS,
    MAX_REQUEST_ID_CHARS,
    float_query_field,
    header_safe,
    header_value_field,
    int_query_field,
    lang_field,
    number_field,
    request_id_field,
    sample_rate_field,
    speed_field,
    voice_field,
)

HUGE = int("9" * 400)  # what JSON's `1e400` written out in digits parses to: too big for a float


@pytest.mark.parametrize("value", [HUGE, -HUGE, float("nan"), float("inf"), 1e308, "1", None, True, [1]])
def test_numbers_out_of_range_or_of_the_wrong_type_are_refused_with_the_range(value: object) -> None:
    with pytest.raises(ConfigError, match="from 1 to 1000") as raised:
        number_field("tokens_per_s", value, 1.0, 1000.0)
    assert raised.value.code == "invalid_field"
    assert "tokens_per_s" in raised.value.message and len(raised.value.message) < 200


def test_a_number_in_range_comes_back_as_a_float() -> None:
    assert number_field("x", 3, 1.0, 1000.0) == 3.0


@pytest.mark.parametrize(
    ("check", "value", "field"),
    [
        (speed_field, HUGE, "speed"),
        (speed_field, -HUGE, "speed"),
        (sample_rate_field, HUGE, "sample_rate"),
        (lang_field, "x" * 60_000, "lang"),
        (lang_field, "en-us" + "\x00", "lang"),
        (voice_field, "a" * 60_000, "voice"),
    ],
)
def test_huge_values_are_refused_with_a_bounded_message(check: object, value: object, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check(value)  # type: ignore[operator]
    assert raised.value.code == "invalid_field"
    assert field in raised.value.message and len(raised.value.message) < 200


def test_a_language_tag_is_bounded_before_it_is_looked_up() -> None:
    with pytest.raises(ConfigError, match="language tag"):
        lang_field("e" * (MAX_LANG_CHARS + 1))
    assert lang_field(" EN_us ") == "en-us"


@pytest.mark.parametrize(
    "raw", ["\u00b2", "9" * 5000, "\u0661\u0666\u0660\u0660\u0660", "16_000", "16000.0", "", "0x10", "1e4"]
)
def test_an_integer_query_is_ascii_digits_or_invalid_field(raw: str) -> None:
    with pytest.raises(ConfigError, match="sample_rate must be an integer") as raised:
        int_query_field("sample_rate", raw)
    assert raised.value.code == "invalid_field" and len(raised.value.message) < 200


@pytest.mark.parametrize("raw", ["nan", "inf", "1_0", "\u0661.5", "1.5.5", "", ".", "9" * 5000])
def test_a_decimal_query_is_ascii_digits_or_invalid_field(raw: str) -> None:
    with pytest.raises(ConfigError, match="speed must be a decimal number") as raised:
        float_query_field("speed", raw)
    assert raised.value.code == "invalid_field"


def test_query_numbers_in_ascii_digits_are_read() -> None:
    assert int_query_field("sample_rate", " 16000 ") == 16000
    assert [float_query_field("speed", raw) for raw in ("1", "1.25", ".5", "2e-1", "-1.")] == [
        1.0, 1.25, 0.5, 0.2, -1.0,
    ]  # fmt: skip


def h11_sends(value: str) -> bool:
    """Whether h11, uvicorn's HTTP/1.1, sends ``value`` as a header value (it refuses CR, LF, NUL...)."""
    try:
        raw = value.encode("latin-1")  # how Starlette encodes header values
        h11.Response(status_code=200, headers=[("dg-model-name", raw)])
    except (UnicodeEncodeError, h11.LocalProtocolError):
        return False
    return True


@given(st.text(st.characters(max_codepoint=0x7F), max_size=40) | st.text(max_size=40))
def test_whatever_is_header_safe_h11_sends(value: str) -> None:
    if header_safe(value, 40):
        assert h11_sends(value)


@pytest.mark.parametrize(
    "value",
    ["\U0001f600", "af_heart\r\nX-Smuggled: yes", "\u3000", "a\x00", "a\tb", " a", "a ", "", "x" * 201],
)
def test_values_no_header_can_carry_are_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ConfigError, match="model must be 1 to 200 printable ASCII") as raised:
        header_value_field("model", value, 200)
    assert raised.value.code == "invalid_field"


def test_a_blend_with_spaces_inside_is_header_safe_and_the_check_can_fail() -> None:
    assert header_value_field("model", "af_bella(2) + af_sky(1)", 200) == "af_bella(2) + af_sky(1)"
    assert not h11_sends("a\r\nb")  # the property above can fail


@pytest.mark.parametrize("value", ["r" * (MAX_REQUEST_ID_CHARS + 1), 2**63, True, 1.5, [1]])
def test_a_request_id_over_its_limit_or_of_another_type_is_invalid_message(value: object) -> None:
    with pytest.raises(ProtocolError, match="request_id") as raised:
        request_id_field(value)
    assert raised.value.code == "invalid_message" and len(raised.value.message) < 200


def test_a_request_id_at_its_limit_or_a_64_bit_integer_is_kept() -> None:
    assert request_id_field("r" * MAX_REQUEST_ID_CHARS) == "r" * MAX_REQUEST_ID_CHARS
    assert request_id_field(-(2**63)) == -(2**63) and request_id_field(None) is None
