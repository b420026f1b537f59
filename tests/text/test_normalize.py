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
    "a lone star is kept": ("a * b", "a * b"),
    "a star between numbers is times": ("2 * 3 and 2*3", "2 times 3 and 2 times 3"),
    "link text stays, URL goes": ("Read [the docs](https://x.org/d) now.", "Read the docs now."),
    "image alt text stays": ("![a cat](cat.png)", "a cat"),
    "URL becomes its host": (
        "See https://www.docs.python.org/3/x?y=1. Ok",
        "See docs dot python dot org. Ok",
    ),
    "email is spelled out": (
        "Mail bob.smith@example.com today",
        "Mail bob dot smith at example dot com today",
    ),
    "heading markers": ("## Setup steps ##", "Setup steps"),
    "block quote": ("> Quoted words", "Quoted words"),
    "bullet": ("- Stir well", "Stir well"),
    "numbered item keeps its number": ("2) Add water", "2. Add water"),
    "table row: its first cell, a colon, the rest": ("| Name | Age |", "Name: Age."),
    "table row of three cells": ("| Speed | 10 | 20 |", "Speed: 10, 20."),
    "table row without edges": ("Task | Owner", "Task: Owner"),
    "table row with empty cells": ("| | Before | | After |", "Before, After."),
    "table row ending in an empty cell": ("| Plums | |", "Plums."),
    "table row ending in punctuation": ("| Done | Yes! |", "Done: Yes!"),
    "table cells are normalized": ("| **Sync** | 9–5 |", "Sync: 9 to 5."),
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
    "phone number": (
        "Call 555-1234 or 555-123-4567",
        "Call five five five, one two three four or five five five, one two three, four five six seven",
    ),
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
    # links: the text only, however the target is written
    "link text keeps its emphasis out": (
        "The [**official** site](https://python.org) has it",
        "The official site has it",
    ),
    "link target with parentheses": ("On [Wikipedia](https://en.wikipedia.org/wiki/A_(b)).", "On Wikipedia."),
    "link with a title": ('See [the docs](https://x.org "Docs") now', "See the docs now"),
    "reference link": ("See [the guide][1] now", "See the guide now"),
    "reference definition": ("[1]: https://docs.example.com/guide", ""),
    "footnote marker": ("It works.[^1]", "It works."),
    "link text cut off by a segment end": ("[Click here!", "Click here!"),
    "autolink": (
        "Visit <https://www.example.com/a> or <mailto:bob@x.org>",
        "Visit example dot com or bob at x dot org",
    ),
    "bare domain": ("Go to docs.google.com/drive today", "Go to docs dot google dot com today"),
    "a cited source is decoration": ("The study (https://arxiv.org/abs/1) found it", "The study found it"),
    "a see-also address is decoration": ("Read the manual (see example.com/manual).", "Read the manual."),
    "task list boxes": ("- [x] Pay the rent", "Pay the rent"),
    "setext underline": ("=======", ""),
    # numbers
    "money with a scale": (
        "$2.5M, $15k, $3B and €4.2 billion",
        "2.5 million dollars, 15 thousand dollars, 3 billion dollars and 4.2 billion euros",
    ),
    "currency misaki does not name": ("¥1,500 or ₹200", "1,500 yen or 200 rupees"),
    "per month": ("$19.99/month or 5/mo", "$19.99 per month or 5 per month"),
    "money range": ("$10–$20", "$10 to $20"),
    "units": (
        "5 km, 1 km, 128 GB, 50 km/h, 1 ft, 12 ft",
        "5 kilometers, 1 kilometer, 128 gigabytes, 50 kilometers per hour, 1 foot, 12 feet",
    ),
    "not a unit": ("5 kmh and x km", "5 kmh and x km"),
    "times": ("2–3x faster", "2 to 3 times faster"),
    "month and day": ("Jan. 15, March 1, 2025 and Nov 3", "January 15th, March 1st, 2025 and November 3rd"),
    "month and year is no day": ("In March 2025", "In March 2025"),
    "day range": ("Mon–Fri and Saturday-Sunday", "Monday to Friday and Saturday to Sunday"),
    "am to pm": ("9am–5pm", "9am to 5pm"),
    "time range": ("From 6:00 to 8:30 pm", "From 6 to 8 30 pm"),
    "timestamp": (
        "At 2024-06-15T14:30:00Z or 2024-06-15 09:05+02:00",
        "At June 15th, 2024, 14 30 UTC or June 15th, 2024, 9 oh 5 UTC plus 2",
    ),
    "phone in parentheses": (
        "Call (555) 123-4567",
        "Call five five five, one two three, four five six seven",
    ),
    "toll-free number": ("Dial 1-800-555-0199", "Dial one, 800, five five five, oh one nine nine"),
    "international number": (
        "Call +44 20 7946 0958",
        "Call plus four four, two oh, seven nine four six, oh nine five eight",
    ),
    "number with a leading zero": (
        "Call 020 7946 0321",
        "Call oh two oh, seven nine four six, oh three two one",
    ),
    "regnal numeral": ("Henry VIII and Elizabeth II", "Henry the 8th and Elizabeth the 2nd"),
    "numeral after a word": ("World War II, Part IV", "World War 2, Part 4"),
    "one letter after a word": ("Plan B. I agree, Plan I", "Plan B. I agree, Plan I"),
    # words
    "phrase abbreviations": (
        "e.g. this, i.e. that, approx. 3",
        "for example this, that is that, approximately 3",
    ),
    "capitalized phrase abbreviation": (
        "E.g. this. BTW, that. Send it ASAP.",
        "For example this. By the way, that. Send it as soon as possible.",
    ),
    "also known as": ("Bob, a.k.a. the boss, aka Bob", "Bob, also known as the boss, also known as Bob"),
    "a rate": ("up 5 MB/s", "up 5 megabytes per second"),
    "with and without": ("Coffee w/ milk, w/o sugar", "Coffee with milk, without sugar"),
    "street after a name, saint before one": ("Oak St. and St. Louis", "Oak Street and St. Louis"),
    "abbreviation ending the text keeps its period": ("It is on Park Ave.", "It is on Park Avenue."),
    "number sign word": ("No. 5 and no. 6", "Number 5 and number 6"),
    "acronym said as a word": ("Send JSON", "Send Jason"),
    "acronym misaki runs together, said as its letters": (
        "The ETA is ten minutes.",
        "The E T A is ten minutes.",
    ),
    "slash for or": ("Answer yes/no, and/or skip", "Answer yes or no, and or skip"),
    "optional plural": ("Add the file(s)", "Add the files"),
    "call parentheses": ("Call print() and time.sleep()", "Call print and time dot sleep"),
    "dotted names": (
        "Open config.yaml, not e.g. U.S. or 3.14",
        "Open config dot yaml, not for example U.S. or 3.14",
    ),
    "keyboard shortcut": ("Press Ctrl+Shift+P", "Press control shift P"),
    "emoticons": ("Done :) See you;) soon :D", "Done See you soon"),
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
