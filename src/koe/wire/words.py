"""When each word of the client's text is heard: the data type the pipeline fills and every transport sends.

It lives in :mod:`koe.wire` so that koe's clients read word timings without importing the pipeline;
:func:`koe.pipeline.words.written_words` makes them from the engine's timings.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: Word times are sent rounded to the millisecond (a model frame is 25 ms).
DIGITS = 3


class SpokenWord(msgspec.Struct, frozen=True):
    """A word of the turn's written text and when it is heard.

    Attributes:
        word: the written characters, ``turn_text[source_span[0]:source_span[1]]``.
        source_span: ``[start, end)`` in the turn's text as the client sent it.
        start_s, end_s: seconds from an origin the container states (the segment's or the turn's first
            sample).
    """

    word: str
    start_s: float
    end_s: float
    source_span: tuple[int, int]

    def shifted(self, offset_s: float) -> SpokenWord:
        """The same word with its times moved by ``offset_s`` (segment-relative → turn-relative)."""
        return SpokenWord(
            self.word,
            round(self.start_s + offset_s, DIGITS),
            round(self.end_s + offset_s, DIGITS),
            self.source_span,
        )

    def to_json(self) -> dict[str, Any]:
        """The word as HTTP routes and agent events carry it, as the ``words`` message does."""
        return {
            "word": self.word,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "source_span": list(self.source_span),
        }
