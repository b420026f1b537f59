"""Per language: any way of cutting the text into pieces gives the same segments, each segment's spans
are its source, and every word is covered."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koe.text.languages.lookup import segmenter_for
from koe.text.segment import Segment

#: Each language's words and marks, including what its rules react to (numbers, money, times, titles).
PIECES = {
    "ja": ["今日", "は", "とても", "いい", "天気", "です", "ね", "コーヒー", "AI", "Python",
           "3本", "14:30", "500円", "$5", "2025-03-01",
           "。", "、", "！", "？", "「", "」", "…", "**", "\n", "😀"],
    "zh": ["今天", "天气", "很", "好", "我们", "去", "公园", "Python",
           "3.5%", "1,234", "3-5", "¥20", "14:30",
           "。", "，", "、", "！", "？", "；", "：", "《", "》", "\n", "**"],
    "es": ["hola", "amigo", "café", "mañana", "Sr.", "Dra.", "no.", "¿", "¡", "?", "!", ".", ",", ";",
           "1.234", "3,5", "12,50 €", "€5", "14:30", "1/3/2025", "-5 °C", "\n", "…"],
    "fr": ["bonjour", "ça", "va", "M.", "Mme", " ?", " !", " :", " ;", "\u202f?", ".", ",",
           "1 234", "12,50 €", "14:30", "«", "»", "\n"],
    "hi": ["नमस्ते", "आप", "कैसे", "हैं", "।", "॥", " ।",
           "₹1,234.50", "14:30", "3.5", ",", "?", "\n", "Python"],
    "it": ["ciao", "come", "stai", "Sig.", "Dott.", "?", "!", ".", ",", "3,5", "12,50 €", "14:30", "\n"],
    "pt-br": ["olá", "tudo", "bem", "Sra.", "?", "!", ".", ",", "R$ 12,50", "1º", "14:30", "\n"],
}  # fmt: skip
SEPARATORS = st.sampled_from([" ", " ", "", "", "\n"])


@st.composite
def texts(draw: st.DrawFn, lang: str) -> str:
    parts = draw(st.lists(st.tuples(st.sampled_from(PIECES[lang]), SEPARATORS), max_size=60))
    return "".join(piece + sep for piece, sep in parts)


@st.composite
def cut_into_pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=max(1, len(text) // 2))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def segment(lang: str, pieces: list[str], limit: int | None) -> list[Segment]:
    segmenter = segmenter_for(lang)
    segmenter.set_next_limit(limit)
    return [s for piece in pieces for s in segmenter.feed(piece)] + segmenter.flush()


@pytest.mark.parametrize("lang", list(PIECES))
@settings(max_examples=100, deadline=None)
@given(data=st.data(), limit=st.one_of(st.none(), st.integers(1, 120)))
def test_any_cutting_gives_the_same_segments_in_every_language(
    lang: str, data: st.DataObject, limit: int | None
) -> None:
    text = data.draw(texts(lang))
    whole = segment(lang, [text], limit)
    assert segment(lang, data.draw(cut_into_pieces(text)), limit) == whole
    assert segment(lang, list(text), limit) == whole
    end = 0
    for index, s in enumerate(whole):
        start, stop = s.source_span
        assert end <= start < stop and text[start:stop] == s.text and s.index == index
        assert all(start <= a <= b <= stop for a, b in zip(s.alignment.starts, s.alignment.ends, strict=True))
        end = stop
    covered = [False] * len(text)
    for s in whole:
        covered[s.source_span[0] : s.source_span[1]] = [True] * len(s.text)
    assert all(covered[i] for i, ch in enumerate(text) if ch.isalpha())
