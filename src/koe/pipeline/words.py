"""Word timings of a segment, pointed back at the text the client sent (no I/O, no model).

The engine times words of the *spoken* text (what G2P read: "example dot com"); listeners and captions
care about the *written* text ("https://example.com"). The segment's alignment maps each spoken word to
its source span, and spoken words made from the same written one — a URL, a date, an e-mail address —
merge into that one written word, spoken from the first one's start to the last one's end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from koe.engine.timing import WordTiming
from koe.text.segment import Segment

#: Word times are sent rounded to the millisecond (a model frame is 25 ms).
_DIGITS = 3


@dataclass(frozen=True, slots=True)
class SpokenWord:
    """A word of the turn's written text and when it is heard.

    Attributes:
        word: the written characters, ``turn_text[source_span[0]:source_span[1]]``.
        source_span: ``[start, end)`` in the turn's text as the client sent it.
        start_s, end_s: seconds from an origin the container states (the segment's or the turn's first
            sample).
    """

    word: str
    source_span: tuple[int, int]
    start_s: float
    end_s: float

    def shifted(self, offset_s: float) -> SpokenWord:
        """The same word with its times moved by ``offset_s`` (segment-relative → turn-relative)."""
        return SpokenWord(
            self.word,
            self.source_span,
            round(self.start_s + offset_s, _DIGITS),
            round(self.end_s + offset_s, _DIGITS),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "source_span": list(self.source_span),
        }


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
        SpokenWord(segment.text[a - base : b - base], (a, b), round(s, _DIGITS), round(e, _DIGITS))
        for a, b, s, e in merged
    )
