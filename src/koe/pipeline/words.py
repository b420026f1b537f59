"""Word timings of a segment, pointed back at the text the client sent (no I/O, no model).

The engine times words of the *spoken* text (what G2P read: "example dot com"); listeners and captions
care about the *written* text ("https://example.com"). The segment's alignment maps each spoken word to
its source span, and spoken words made from the same written one — a URL, a date, an e-mail address —
merge into that one written word, spoken from the first one's start to the last one's end.
"""

from __future__ import annotations

from collections.abc import Iterable

from koe.engine.timing import WordTiming
from koe.text.segment import Segment
from koe.wire.words import DIGITS, SpokenWord


def written_words(segment: Segment, timings: Iterable[WordTiming]) -> tuple[SpokenWord, ...]:
    """The segment's timed spoken words as written words.

    Args:
        segment: the segment whose ``spoken_text`` the timings' text spans index.
        timings: in spoken order, seconds from the segment's first sample.
    """
    merged: list[tuple[int, int, float, float]] = []
    for timing in timings:
        start, end = segment.alignment.source_span(timing.text_start, timing.text_end)
        if merged and start < merged[-1][1]:  # another spoken word of the same written one
            first_start, first_end, start_s, _ = merged[-1]
            merged[-1] = (first_start, max(first_end, end), start_s, timing.end_s)
        else:
            merged.append((start, end, timing.start_s, timing.end_s))
    base = segment.source_span[0]
    return tuple(
        SpokenWord(segment.text[a - base : b - base], round(s, DIGITS), round(e, DIGITS), (a, b))
        for a, b, s, e in merged
    )
