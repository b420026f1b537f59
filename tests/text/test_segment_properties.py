"""Properties of the segmenter that hold for any text and any way of cutting it into pieces."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from koe.text.segment import STRAND_CHARS, Segment, Segmenter, SegmenterOptions

WORDS = st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True)
#: Pieces that exercise every rule: abbreviations, numbers, URLs, lists, quotes, CJK, ellipses, dashes.
TOKENS = st.one_of(
    WORDS,
    WORDS,
    WORDS,
    st.sampled_from(
        [
            ". ",
            ", ",
            "! ",
            "? ",
            "?!",
            "...",
            "…",
            "; ",
            ": ",
            " — ",
            " - ",
            "--",
            "\n",
            "\n\n",
            "\n1. ",
            "\n- ",
            "\n## ",
            "Dr.",
            "e.g.",
            "etc.",
            "U.S.",
            "3.14",
            "9:30",
            "1,000",
            "v2.0.1",
            '"',
            "'",
            "(",
            ")",
            "https://x.org/a?b=1",
            "bob@x.org",
            "**",
            "`",
            "你好",
            "。",
            "、",
            "！",
            "」",
            "👋",
            ".",
            ",",
            "!",
        ]
    ),
)
SEPARATORS = st.sampled_from([" ", " ", " ", "", "\n", "  "])


@st.composite
def texts(draw: st.DrawFn, tokens: st.SearchStrategy[str] = TOKENS) -> str:
    parts = draw(st.lists(st.tuples(tokens, SEPARATORS), max_size=80))
    return "".join(token + sep for token, sep in parts)


@st.composite
def cut_into_pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=max(1, len(text) // 2))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


OPTIONS = st.builds(
    lambda words, merge, target, top: SegmenterOptions(
        words, merge, max(merge, target), max(merge, target, top)
    ),
    st.integers(1, 4),
    st.integers(1, 40),
    st.integers(20, 150),
    st.integers(40, 300),
)
LIMITS = st.one_of(st.none(), st.integers(1, 320))


def segment(pieces: list[str], options: SegmenterOptions, limit: int | None) -> list[Segment]:
    seg = Segmenter(options)
    seg.set_next_limit(limit)
    out = [s for piece in pieces for s in seg.feed(piece)]
    return out + seg.flush()


def check_spans(text: str, out: list[Segment], options: SegmenterOptions) -> None:
    previous_end = 0
    for i, s in enumerate(out):
        start, end = s.source_span
        assert previous_end <= start < end, "spans are in order and do not overlap"
        assert text[start:end] == s.text
        assert len(s.text) <= options.max_chars
        assert s.spoken_text and s.index == i and s.is_first == (i == 0)
        assert all(start <= a <= b <= end for a, b in zip(s.alignment.starts, s.alignment.ends, strict=True))
        previous_end = end


@settings(max_examples=150, deadline=None)
@given(data=st.data(), text=st.one_of(texts(), st.text(max_size=200)), options=OPTIONS, limit=LIMITS)
def test_any_cutting_gives_the_same_segments(
    data: st.DataObject, text: str, options: SegmenterOptions, limit: int | None
) -> None:
    whole = segment([text], options, limit)
    assert segment(data.draw(cut_into_pieces(text)), options, limit) == whole
    assert segment(list(text), options, limit) == whole
    check_spans(text, whole, options)


#: Speakable text without code fences, markup or symbols that the normalizer turns into nothing.
PLAIN_TOKENS = st.one_of(
    WORDS,
    WORDS,
    st.sampled_from(
        [
            ". ",
            ", ",
            "! ",
            "? ",
            "...",
            "; ",
            " — ",
            "\n",
            "\n1. ",
            "\n- ",
            "Dr.",
            "e.g.",
            "3.14",
            '"',
            "(",
            ")",
            "你好",
            "。",
            "、",
        ]
    ),
)


@settings(max_examples=150, deadline=None)
@given(text=texts(PLAIN_TOKENS), options=OPTIONS, limit=LIMITS)
def test_segments_cover_all_speakable_text_and_split_no_word(
    text: str, options: SegmenterOptions, limit: int | None
) -> None:
    out = segment([text], options, limit)
    check_spans(text, out, options)
    covered = [False] * len(text)
    for s in out:
        covered[s.source_span[0] : s.source_span[1]] = [True] * len(s.text)
        for edge in s.source_span:
            inside_word = 0 < edge < len(text) and text[edge - 1].isascii() and text[edge].isascii()
            assert not (inside_word and text[edge - 1].isalnum() and text[edge].isalnum()), (edge, s.text)
    assert all(covered[i] for i, ch in enumerate(text) if ch.isalnum())


@settings(max_examples=60, deadline=None)
@given(words=st.lists(WORDS, min_size=1, max_size=60), limit=st.integers(1, 120))
def test_a_limit_is_kept_unless_three_words_do_not_fit(words: list[str], limit: int) -> None:
    text = " ".join(words) + "."
    for s in segment([text], SegmenterOptions(), limit):
        # the sentence's end just past the limit is not cut off (STRAND_CHARS)
        kept = len(s.text) <= limit or (s.text.endswith(".") and len(s.text) <= limit + STRAND_CHARS)
        assert kept or len(re.findall(r"[A-Za-z]+", s.text)) <= 3
