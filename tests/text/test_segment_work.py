"""The text path does work in proportion to the text, whatever the text: pathological inputs (dense
punctuation, runs of leftover punctuation, an unclosed code block with long lines) cost about what prose
costs per character.

Work is counted, not timed: the number of Python lines the segmenter and its scanner execute, which is
deterministic. Before the fix a comma list cost 19 times prose per character and spaced dashes 37 times
(every feed re-read and re-counted the window's candidates). Two searches run inside the regex engine,
where lines cannot count them, so for those the test checks where the next search starts: "… …" used to
be matched again from its first character on every feed, and an unclosed code block's last line searched
again from its start (both quadratic).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import koe.text
from koe.text.boundary import Scanner
from koe.text.segment import Segmenter

_TEXT_DIR = str(Path(koe.text.__file__).parent)
#: How SegmentStream feeds the segmenter: a word (with its trailing space) at a time.
_WORD = re.compile(r"\S*\s*")
CHARS = 1_500
#: Per character, a pathological input may cost this many times what prose costs.
MAX_RATIO_TO_PROSE = 4.0
PROSE = "The quick brown fox jumps over the lazy dog, and then it rests. " * 200

PATHOLOGICAL = {
    "comma list": "a, " * 2000,
    "spaced dashes": "- " * 3000,
    "ellipses": "… " * 3000,
    "pipes": "| " * 3000,
    "line breaks": "x\n" * 3000,
    "short sentences": "Hi. " * 2000,
    "unclosed code block, one long line": "```\n\n" + "code " * 2000,
    "unclosed code block, many lines": "```\n" + "x = 1\n" * 1000,
}


@contextmanager
def counted_lines() -> Iterator[list[int]]:
    """Count the lines executed in koe.text while inside."""
    count = [0]

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(_TEXT_DIR):
            return None
        if event == "line":
            count[0] += 1
        return tracer

    sys.settrace(tracer)
    try:
        yield count
    finally:
        sys.settrace(None)


def work_per_char(text: str) -> float:
    segmenter = Segmenter()
    with counted_lines() as count:
        for word in _WORD.findall(text):
            segmenter.feed(word)
        segmenter.flush()
    return count[0] / len(text)


@pytest.fixture(scope="module")
def prose_work() -> float:
    return work_per_char(PROSE[:CHARS])


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_text_costs_about_what_prose_costs(name: str, prose_work: float) -> None:
    text = PATHOLOGICAL[name][:CHARS]
    assert work_per_char(text) < MAX_RATIO_TO_PROSE * prose_work


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_twice_the_text_costs_twice_the_work(name: str) -> None:
    text = PATHOLOGICAL[name]
    assert work_per_char(text[: 2 * CHARS]) < 1.2 * work_per_char(text[:CHARS])


def test_leftover_punctuation_is_skipped_once_not_matched_again_on_every_feed() -> None:
    segmenter = Segmenter()
    for _ in range(1000):
        segmenter.feed("… ")
    assert segmenter._start == 2000  # the next feed's match starts at the end of what came


@pytest.mark.parametrize(
    "block", ["```\n\n" + "code " * 1000, "```\nx\n```" + "still the closing line " * 100, "```\n  ``"]
)
def test_the_search_for_a_closing_fence_resumes_where_it_stopped(block: str) -> None:
    scanner = Scanner()
    for word in _WORD.findall(block):
        scanner.feed(word)
        scanner.scan(final=False)
    assert scanner._fence_at == len(block) - (2 if block.endswith("``") else 0)
