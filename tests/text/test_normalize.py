"""Speech normalization (markdown, symbols, number forms misaki misreads) and its map back to the source."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.errors import ConfigError
from koe.text.normalize import normalize

CASES = {
    "plain text is kept": ("It costs $5.99, about 45% of it.", "It costs $5.99, about 45% of it."),
    "emphasis markers vanish": ("It's **very** _good_ and ~~bad~~.", "It's very good and bad."),
    "snake_case reads as words": ("Set my_var now.", "Set my var now."),
    "a lone star is kept": ("2 * 3", "2 * 3"),
    "link text stays, URL goes": ("Read [the docs](https://x.org/d) now.", "Read the docs now."),
    "image alt text stays": ("![a cat](cat.png)", "a cat"),
    "URL becomes its host": (
        "See https://www.docs.python.org/3/x?y=1. Ok",
        "See docs dot python dot org. Ok",
    ),
    "email is spelled out": ("Mail bob.smith@example.com today", "Mail bob smith at example dot com today"),
    "heading markers": ("## Setup steps ##", "Setup steps"),
    "block quote": ("> Quoted words", "Quoted words"),
    "bullet": ("- Stir well", "Stir well"),
    "numbered item keeps its number": ("2) Add water", "2. Add water"),
    "table row": ("| Name | Age |", "Name, Age"),
    "table rule": ("|---|:---:|", ""),
    "horizontal rule": ("* * *", ""),
    "inline code": ("Run `pip install koe` now", "Run pip install koe now"),
    "html tags": ("one<br>two", "one two"),
    "ISO date": ("On 2025-03-01 we left", "On March 1st, 2025 we left"),
    "impossible ISO date left alone": ("Code 2025-13-45 here", "Code 2025-13-45 here"),
    "US slash date": ("On 03/01/2025 ok", "On March 1st, 2025 ok"),
    "day-first slash date": ("On 23/01/2025 ok", "On January 23rd, 2025 ok"),
    "ordinals": (
        "On 2025-01-02 and 2025-01-11 and 2025-01-22",
        "On January 2nd, 2025 and January 11th, 2025 and January 22nd, 2025",
    ),
    "time": ("At 9:30 or 14:05", "At 9 30 or 14 oh 5"),
    "o'clock": ("At 9:00.", "At 9 o'clock."),
    "time with pm": ("At 9:00 pm and 7:15 a.m.", "At 9 pm and 7 15 a.m."),
    "not a time": ("Score 99:99 now", "Score 99:99 now"),
    "phone number": ("Call 555-1234 or 555-123-4567", "Call 5 5 5, 1 2 3 4 or 5 5 5, 1 2 3, 4 5 6 7"),
    "fraction": ("Add 1/2 cup, not 24/7", "Add one half cup, not 24/7"),
    "range": ("It takes 3–5 days, 2020-2024", "It takes 3 to 5 days, 2020 to 2024"),
    "negative number": ("It is -5 out", "It is minus 5 out"),
    "degrees": ("It is 5°C or 41 °F, 90°", "It is 5 degrees Celsius or 41 degrees Fahrenheit, 90 degrees"),
    "number sign": ("item #3", "item number 3"),
    "about": ("~5 minutes", "about 5 minutes"),
    "symbols": ("x → y, 2^10, a ≤ b", "x to y, 2 to the power of 10, a at most b"),
    "emoji removed": ("Hello 👋 world 🇫🇷!", "Hello world!"),
    "whitespace collapsed": ("  a \n\t b  ", "a b"),
    "nothing speakable": ("**) —", ""),
}


@pytest.mark.parametrize(("text", "spoken"), CASES.values(), ids=CASES.keys())
def test_normalize(text: str, spoken: str) -> None:
    assert normalize(text).spoken == spoken


def test_verbatim_characters_map_to_themselves() -> None:
    text = "Read [the docs](https://x.org) **now**"
    result = normalize(text)
    for word in ("Read", "the docs", "now"):
        start = result.spoken.index(word)
        a, b = result.alignment.source_span(start, start + len(word))
        assert text[a:b] == word


def test_replaced_text_maps_to_what_it_replaced() -> None:
    text = "On 2025-03-01 at 14:05"
    result = normalize(text)
    start = result.spoken.index("March")
    a, b = result.alignment.source_span(start, start + len("March"))
    assert text[a:b] == "2025-03-01"
    start = result.spoken.index("14 oh 5")
    assert result.alignment.source_span(start, start + 7) == (17, 22)


def test_shifted_alignment_moves_source_offsets() -> None:
    result = normalize("ab")
    assert result.alignment.shifted(10).source_span(0, 2) == (10, 12)


@pytest.mark.parametrize(("start", "end"), [(0, 0), (-1, 1), (1, 9), (2, 1)])
def test_out_of_range_spoken_spans_are_refused(start: int, end: int) -> None:
    with pytest.raises(ConfigError, match="expected a spoken range"):
        normalize("abc").alignment.source_span(start, end)


@given(st.text(max_size=300))
def test_every_spoken_character_maps_inside_the_source_in_order(text: str) -> None:
    result = normalize(text)
    starts, ends = result.alignment.starts, result.alignment.ends
    assert len(starts) == len(ends) == len(result.spoken)
    assert all(0 <= a <= b <= len(text) for a, b in zip(starts, ends, strict=True))
    assert list(starts) == sorted(starts)
    assert result.spoken == result.spoken.strip() and "  " not in result.spoken
