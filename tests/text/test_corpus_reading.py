"""The reading corpus without a model: what koe hands to G2P for each LLM-style text, however it streams.

``spoken`` in the corpus is the segments' spoken texts joined by spaces; the ASR check of the same corpus
(what a listener hears) is ``koe bench --only reading`` and tests/bench/test_reading_asr.py.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koe.text.segment import Segment, Segmenter
from koe_bench import corpus

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
    "table": (
        ["|", " Name", " |", " Age", " |\n", "|---", "|---", "|\n", "|", " Tom", " |", " 31", " |", "\n"],
        "Name: Age. Tom: 31.",
    ),
    "phone number": (
        ["My", " cell", " is", " 212", "-", "555", "-", "018", "7", "."],
        "My cell is two one two, five five five, oh one eight seven.",
    ),
}


@pytest.mark.parametrize(("tokens", "said"), STREAMED.values(), ids=STREAMED.keys())
def test_markup_split_across_tokens_is_read_as_when_it_arrives_whole(tokens: list[str], said: str) -> None:
    whole = segments(["".join(tokens)])
    assert segments(tokens) == whole
    assert " ".join(s.spoken_text for s in whole) == said


LINK_TOKENS = st.sampled_from(
    [
        "[",
        "](",
        ")",
        "(",
        "]",
        "[the docs",
        "](https://x.org/a_(b)",
        "https://",
        "x.org/",
        "word",
        "two words",
        "!",
        ". ",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    parts=st.lists(st.tuples(LINK_TOKENS, st.sampled_from(["", " ", "", "\n"])), max_size=40),
    limit=st.one_of(st.none(), st.integers(1, 80)),
)
def test_links_under_a_segment_limit_give_the_same_segments_however_they_stream(
    data: st.DataObject, parts: list[tuple[str, str]], limit: int | None
) -> None:
    text = "".join(token + sep for token, sep in parts)

    def cut(pieces: list[str]) -> list[Segment]:
        seg = Segmenter()
        seg.set_next_limit(limit)
        return [s for piece in pieces for s in seg.feed(piece)] + seg.flush()

    whole = cut([text])
    assert cut(list(text)) == whole
    if text:
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
        assert cut([text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)]) if b > a]) == whole


def test_a_link_target_does_not_count_toward_the_segment_limit() -> None:
    text = "Find it on [GitHub](https://github.com/acme/tool) today."
    seg = Segmenter()
    seg.set_next_limit(30)  # the 25 characters said fit; with the target, 56 would not
    assert [s.spoken_text for s in (*seg.feed(text), *seg.flush())] == ["Find it on GitHub today."]


def test_a_forced_cut_falls_outside_an_aside_so_a_cited_address_stays_unsaid() -> None:
    text = "It is explained well in the manual (see https://example.com/manual#setup)."
    seg = Segmenter()
    seg.set_next_limit(40)  # "(see" ends within the limit: a cut there would leave the address alone
    assert [s.spoken_text for s in (*seg.feed(text), *seg.flush())] == ["It is explained well in the manual"]
