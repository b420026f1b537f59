"""Token durations → seconds per phoneme span and per word, without the model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.engine.timing import FRAME_SAMPLES, SegmentTiming, WordSpan
from koe.engine.vocab import tokenize
from koe.errors import SynthesisError
from koe.types import SAMPLE_RATE

FRAME_S = FRAME_SAMPLES / SAMPLE_RATE


def _timing(phonemes: str, durations: list[int]) -> SegmentTiming:
    return SegmentTiming(phonemes, np.array(durations, dtype=np.int64))


def test_a_span_lasts_from_its_first_token_to_its_last() -> None:
    # "hi yo": tokens [pad] h i ␠ y o [pad]
    timing = _timing("hi yo", [10, 2, 3, 1, 4, 5, 1])
    assert timing.samples == 26 * FRAME_SAMPLES and timing.lead_frames == 10
    assert timing.span_seconds(0, 2) == pytest.approx((10 * FRAME_S, 15 * FRAME_S))
    assert timing.span_seconds(3, 5) == pytest.approx((16 * FRAME_S, 25 * FRAME_S))
    words = timing.words([WordSpan(0, 2, 0, 2), WordSpan(3, 5, 3, 5)])
    assert [(w.text_start, w.text_end) for w in words] == [(0, 2), (3, 5)]


def test_symbols_outside_the_vocabulary_take_no_time() -> None:
    phonemes = "a❓b"  # the engine drops ❓ (misaki's unknown-word mark)
    assert len(tokenize(phonemes)) == 2
    timing = _timing(phonemes, [5, 2, 3, 1])
    assert timing.span_seconds(1, 2) == pytest.approx((7 * FRAME_S, 7 * FRAME_S))
    assert timing.span_seconds(0, 3) == pytest.approx((5 * FRAME_S, 10 * FRAME_S))


def test_spans_outside_the_phonemes_or_durations_are_refused() -> None:
    with pytest.raises(SynthesisError, match="outside"):
        _timing("ab", [1, 1, 1, 1]).span_seconds(1, 3)
    with pytest.raises(SynthesisError, match="durations cover"):
        _timing("abc", [1, 1, 1]).span_seconds(0, 3)


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 9)), min_size=1, max_size=20), st.integers(1, 20))
def test_word_times_are_ordered_and_inside_the_audio(words: list[tuple[int, int]], lead: int) -> None:
    phonemes = " ".join("a" * length for length, _ in words)
    durations = [lead]
    for index, (length, frames) in enumerate(words):
        durations += [frames] * length + ([1] if index < len(words) - 1 else [])
    durations.append(1)
    timing = _timing(phonemes, durations)
    spans, cursor = [], 0
    for length, _ in words:
        spans.append(WordSpan(cursor, cursor + length, cursor, cursor + length))
        cursor += length + 1
    timed = timing.words(spans)
    assert timed[0].start_s == pytest.approx(lead * FRAME_S)
    assert timed[-1].end_s <= timing.samples / SAMPLE_RATE
    for word, (length, frames) in zip(timed, words, strict=True):
        assert word.end_s - word.start_s == pytest.approx(length * frames * FRAME_S)
    assert all(a.end_s <= b.start_s for a, b in itertools.pairwise(timed))
