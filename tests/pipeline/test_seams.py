"""What each utterance keeps at the joins: pure arithmetic on durations, and the kept audio itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.pipeline.seams import (
    CLAUSE_TAIL_FRAMES,
    FADE_SAMPLES,
    ONSET_FRAMES,
    SENTENCE_TAIL_FRAMES,
    WORD_TAIL_FRAMES,
    Trim,
    trim,
)


def _timing(phonemes: str, lead: int, tail: list[int], body: int = 4) -> SegmentTiming:
    """``phonemes`` (no spaces) with ``lead`` frames of leading pad; ``tail`` gives the last tokens' and the
    trailing pad's frames; every other token lasts ``body`` frames."""
    tokens = len(phonemes)
    durations = [lead, *([body] * (tokens - len(tail) + 1)), *tail]
    return SegmentTiming(phonemes, np.array(durations, dtype=np.int64))


@pytest.mark.parametrize(
    ("phonemes", "keep"),
    [("hˈɛlO.", SENTENCE_TAIL_FRAMES), ("hˈɛlO?", SENTENCE_TAIL_FRAMES), ("hˈɛlO,", CLAUSE_TAIL_FRAMES)],
)
def test_the_lead_keeps_its_onset_and_the_tail_a_pause_of_its_kind(phonemes: str, keep: int) -> None:
    timing = _timing(phonemes, lead=16, tail=[8, 1])  # final punctuation 8 frames, trailing pad 1
    kept = trim(timing)
    assert kept.start == (16 - ONSET_FRAMES) * FRAME_SAMPLES
    assert kept.end == (timing.frames - (9 - keep)) * FRAME_SAMPLES


def test_a_windowed_opening_keeps_its_whole_lead_and_the_same_tail() -> None:
    timing = _timing("hˈɛlO.", lead=16, tail=[8, 1])
    assert trim(timing, keep_lead=True) == Trim(0, trim(timing).end)


def test_an_utterance_without_punctuation_keeps_its_short_tail_and_a_short_lead_stays_whole() -> None:
    timing = _timing("hˈɛlO", lead=2, tail=[1])
    assert trim(timing) == Trim(0, timing.samples)  # nothing to trim: already shorter than what is kept
    assert WORD_TAIL_FRAMES >= 1


def test_kept_audio_is_the_same_whatever_the_chunks_and_fades_out_at_the_cut() -> None:
    audio = np.ones(20 * FRAME_SAMPLES, dtype=np.float32)
    kept = Trim(3 * FRAME_SAMPLES, 17 * FRAME_SAMPLES)
    whole = kept.apply(audio, 0)
    assert whole.size == kept.samples
    assert whole[0] == 1.0 and whole[-1] < 0.01 and np.all(np.diff(whole[-FADE_SAMPLES:]) < 0)
    cuts = [0, 100, 1800, 1801, 9000, 9600, 12000]
    pieces = [kept.apply(audio[a:b], a) for a, b in zip(cuts, [*cuts[1:], audio.size], strict=True)]
    assert np.array_equal(np.concatenate(pieces), whole)


@given(
    lead=st.integers(1, 30),
    tail=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    ending=st.sampled_from([".", ",", "!", "", ".”", "…"]),
)
def test_the_kept_span_lies_inside_the_utterance_and_never_cuts_a_spoken_token(
    lead: int, tail: list[int], ending: str
) -> None:
    phonemes = "hˈɛlOwˈɜɹld" + ending
    quiet = len(ending)
    timing = _timing(phonemes, lead, ([4] * max(0, quiet + 1 - len(tail)) + tail)[-(quiet + 1) :])
    kept = trim(timing)
    first_spoken = int(timing.durations[0]) * FRAME_SAMPLES
    last_spoken = int(timing.durations[: len(timing.durations) - 1 - quiet].sum()) * FRAME_SAMPLES
    assert 0 <= kept.start <= max(0, first_spoken - FRAME_SAMPLES) and kept.start <= first_spoken
    assert last_spoken <= kept.end <= timing.samples
