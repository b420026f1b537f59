"""The reading corpus without a model: what koe hands to G2P for each LLM-style text, however it streams.

``spoken`` in the corpus is the segments' spoken texts joined by spaces; the ASR check of the same corpus
(what a listener hears) is ``koe bench --only reading`` and tests/bench/test_reading_asr.py.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koe.bench import corpus
from koe.text.segment import Segment, Segmenter

READINGS = corpus.load()


def segments(pieces: list[str]) -> list[Segment]:
    seg = Segmenter()
    return [s for piece in pieces for s in seg.feed(piece)] + seg.flush()


def spoken(pieces: list[str]) -> str:
    return " ".join(s.spoken_text for s in segments(pieces))


@pytest.mark.parametrize("reading", READINGS, ids=[f"{r.group}: {r.text[:40]}" for r in READINGS])
def test_each_text_is_normalized_to_its_spoken_form(reading: corpus.Reading) -> None:
    assert spoken([reading.text]) == reading.spoken


@settings(max_examples=200, deadline=None)
@given(data=st.data(), reading=st.sampled_from(READINGS))
def test_a_corpus_text_streamed_in_any_pieces_is_read_the_same(
    data: st.DataObject, reading: corpus.Reading
) -> None:
    text = reading.text
    cuts = sorted(data.draw(st.sets(st.integers(1, len(text) - 1), max_size=len(text))))
    pieces = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
    assert segments(pieces) == segments([text])


@pytest.mark.parametrize("reading", READINGS, ids=[f"{r.group}: {r.text[:40]}" for r in READINGS])
def test_spoken_characters_point_into_their_segment(reading: corpus.Reading) -> None:
    for s in segments(list(reading.text)):
        start, end = s.source_span
        assert all(start <= a <= b <= end for a, b in zip(s.alignment.starts, s.alignment.ends, strict=True))
        assert list(s.alignment.starts) == sorted(s.alignment.starts)


#: How an LLM streams a link, a code span and an address: a few characters per token.
STREAMED = {
    "link": (
        [
            "Read",
            " [",
            "the",
            " docs",
            "](",
            "https",
            "://",
            "docs",
            ".python",
            ".org",
            "/3",
            "/)",
            " first",
            ".",
        ],
        "Read the docs first.",
    ),
    "link with emphasis and parentheses in its target": (
        [
            "On",
            " [**",
            "Wiki",
            "pedia",
            "**",
            "](",
            "https",
            "://en",
            ".wikipedia",
            ".org",
            "/wiki",
            "/A_",
            "(b",
            ")).",
        ],
        "On Wikipedia.",
    ),
    "link text with a sentence end": (
        ["[", "Click", " here", "!", "](", "https", "://x", ".org", ")", " Then", " go", "."],
        "Click here! Then go.",
    ),
    "code span": (
        ["Run", " `", "pip", " install", " koe", "`", " or", " `", "time", ".sleep", "()", "`."],
        "Run pip install koe or time dot sleep.",
    ),
    "e-mail address": (
        ["Mail", " john", ".smith", "@", "gmail", ".com", " today", "."],
        "Mail john dot smith at gmail dot com today.",
    ),
}


@pytest.mark.parametrize(("tokens", "said"), STREAMED.values(), ids=STREAMED.keys())
def test_markup_split_across_tokens_is_read_as_when_it_arrives_whole(tokens: list[str], said: str) -> None:
    whole = segments(["".join(tokens)])
    assert segments(tokens) == whole
    assert " ".join(s.spoken_text for s in whole) == said
