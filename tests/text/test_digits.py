"""A number longer than its language's G2P reads as a number is read digit by digit, in groups, whatever
the language's rules made of it; one at the language's ceiling is left to the G2P."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.languages import CODES
from koe.text.digits import DIGIT_GROUP, ENGLISH_DIGITS, long_numbers
from koe.text.languages.lookup import rules_for
from koe.text.normalize import normalize

_RUN = re.compile(r"\d+")
#: Each language's digits back to 0-9 (the Japanese and Mandarin readings write Chinese digits).
_DIGIT_VALUES = str.maketrans("〇零一二三四五六七八九", "00123456789")


def _digits_said(spoken: str) -> str:
    return re.sub(r"\D", "", spoken.translate(_DIGIT_VALUES))


@pytest.mark.parametrize("lang", CODES)
def test_a_number_past_the_ceiling_is_read_digit_by_digit_in_every_language(lang: str) -> None:
    digits = "12345678901234567890"
    spoken = rules_for(lang).normalize(f"Code {digits} ok.").spoken
    assert max(len(run) for run in _RUN.findall(spoken.translate(_DIGIT_VALUES)) or [""]) <= DIGIT_GROUP
    assert _digits_said(spoken) == digits


@pytest.mark.parametrize("lang", CODES)
def test_a_number_at_the_ceiling_is_left_to_the_g2p(lang: str) -> None:
    """The control: the G2P reads numbers up to the ceiling as numbers."""
    number = "9" * rules_for(lang).digits.max_digits
    assert number in rules_for(lang).normalize(f"It is {number} ok.").spoken


@pytest.mark.parametrize(
    ("lang", "spoken"),
    [
        ("en-us", "It costs $34,000,000,000,000."),
        ("ja", "It costs 三四〇〇、〇〇〇〇、〇〇〇〇、〇〇ドル."),
    ],
)
def test_fourteen_digits_are_a_number_in_english_and_a_code_in_japanese(lang: str, spoken: str) -> None:
    """misaki reads English numbers as words up to the hundreds of trillions; OpenJTalk stops at the
    hundreds of billions."""
    assert rules_for(lang).normalize("It costs $34,000,000,000,000.").spoken == spoken


@pytest.mark.parametrize(
    ("lang", "spoken"),
    [
        ("en-us", "Pi is 3 point 1 4 1 5, 9 2 6 5, 3 5 8 9, 7 9 3 2, 3 8 4 6."),
        ("es", "Pi is 3 coma 1 4 1 5, 9 2 6 5, 3 5 8 9, 7 9 3 2, 3 8 4 6."),
        ("hi", "Pi is 3 दशमलव 1 4 1 5, 9 2 6 5, 3 5 8 9, 7 9 3 2, 3 8 4 6."),
        ("ja", "Pi is 3点一四一五、九二六五、三五八九、七九三二、三八四六."),
        ("zh", "Pi is 3点一四一五，九二六五，三五八九，七九三二，三八四六."),
    ],
)
def test_long_decimals_keep_the_whole_number_and_are_said_after_the_language_s_point(
    lang: str, spoken: str
) -> None:
    assert rules_for(lang).normalize("Pi is 3.14159265358979323846.").spoken == spoken


def test_a_long_number_with_thousands_commas_is_read_without_them() -> None:
    spoken = normalize("It is 1,234,567,890,123,456 now").spoken
    assert spoken == "It is 1 2 3 4, 5 6 7 8, 9 0 1 2, 3 4 5 6 now"


def test_each_group_points_back_at_its_own_digits() -> None:
    text = "Card 4111222233334444 now"
    normalized = normalize(text)
    spoken = normalized.spoken
    groups = [m.span() for m in re.finditer(r"\d(?: \d)*", spoken)]
    sources = [text[slice(*normalized.alignment.source_span(*span))] for span in groups]
    assert sources == ["4111", "2222", "3333", "4444"]


def test_a_price_with_thousands_of_decimals_is_said_with_all_of_them_in_spanish() -> None:
    """A sum with more than two decimals is no sum in cents: its decimals were once dropped silently."""
    spoken = rules_for("es").normalize(f"Total $1.{'5' * 20} ok.").spoken
    assert spoken.startswith("Total 1 coma 5 5 5 5, ") and spoken.endswith(" dólares ok.")
    assert _digits_said(spoken) == "1" + "5" * 20


def test_rewriting_a_text_without_long_numbers_is_nothing() -> None:
    assert long_numbers("It costs 5.99, 123456789012 and 3.141592653589.", ENGLISH_DIGITS) == []


_TEXT = st.text(alphabet=st.sampled_from("0123456789 .,$€¥:-/%年元x"), max_size=200)


@given(_TEXT, st.sampled_from(CODES))
def test_no_spoken_number_passes_the_ceiling_and_the_alignment_stays_monotone(text: str, lang: str) -> None:
    normalized = rules_for(lang).normalize(text)
    assert all(len(run) <= rules_for(lang).digits.max_digits for run in _RUN.findall(normalized.spoken))
    starts, ends = normalized.alignment.starts, normalized.alignment.ends
    assert list(starts) == sorted(starts) and list(ends) == sorted(ends)
    assert all(0 <= s <= e <= len(text) for s, e in zip(starts, ends, strict=True))


@pytest.mark.parametrize("lang", CODES)
def test_no_rule_starts_a_match_inside_a_run_of_digits(lang: str) -> None:
    """A rule tried at every digit of a long run, reading the rest of the run each time, is quadratic: an
    amount before its currency did so, and 4,400 digits held the event loop a second in seven languages."""
    run = "5" * 40 + "€ $ ¥ ₹"
    for name, pattern, _ in rules_for(lang).rules:
        compiled = re.compile(pattern, re.M)
        starts = {match.start() for pos in range(1, 40) if (match := compiled.match(run, pos))}
        assert not starts, f"{lang} {name} matches from inside the run at {sorted(starts)}"
