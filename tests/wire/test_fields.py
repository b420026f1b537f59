"""Field validators: a bad value of any size or type is refused with ``invalid_field``, named, bounded."""

from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.wire.fields import (
    MAX_LANG_CHARS,
    lang_field,
    number_field,
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
