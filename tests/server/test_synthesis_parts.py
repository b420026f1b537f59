"""A segment's parts and their bookkeeping, without a model: where each part lies in its segment, and how
much of a segment's audio is still on its way (what deadlines and window sizes are computed from)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.server.segment_job import Synthesized
from koe.server.synthesis import SegmentProgress
from koe.text.segment import Segmenter
from koe.types import SAMPLE_RATE

_SEGMENTER = Segmenter()
(SEGMENT,) = [*_SEGMENTER.feed("Hello there."), *_SEGMENTER.flush()]


def _part(samples: int, start: int, last: bool) -> Synthesized:
    return Synthesized(SEGMENT, np.zeros(samples, dtype=np.float32), 0.1, (), start, last)


def test_a_whole_segment_is_one_part_both_first_and_last() -> None:
    whole = Synthesized(SEGMENT, np.zeros(SAMPLE_RATE, dtype=np.float32), 0.4)
    assert whole.first and whole.last
    assert whole.end_s == 1.0


def test_later_parts_end_where_the_segment_has_got_to() -> None:
    silence, window = _part(6_000, 0, last=False), _part(18_000, 6_000, last=True)
    assert silence.first and not silence.last
    assert not window.first and window.last
    assert window.end_s == 1.0  # the last part's end: the segment's duration


def test_pending_audio_is_the_estimate_until_a_part_is_handed_out() -> None:
    progress = SegmentProgress(estimate_s=2.0)
    progress.produced = SAMPLE_RATE // 2
    assert progress.pending_s() == 2.0 and progress.undelivered_s() == 0.5
    progress.handed = SAMPLE_RATE // 2
    assert progress.pending_s() == 1.5 and progress.undelivered_s() == 0.0


def test_a_segment_longer_than_its_estimate_still_counts_what_waits() -> None:
    progress = SegmentProgress(estimate_s=1.0, produced=3 * SAMPLE_RATE, handed=SAMPLE_RATE)
    assert progress.pending_s() == pytest.approx(2.0)


@given(
    estimate_s=st.floats(0.0, 30.0),
    parts=st.lists(st.integers(1, 4 * SAMPLE_RATE), min_size=1, max_size=8),
    handed_parts=st.integers(1, 8),
)
def test_once_parts_go_out_pending_audio_covers_what_waits_and_what_the_estimate_still_expects(
    estimate_s: float, parts: list[int], handed_parts: int
) -> None:
    handed = sum(parts[:handed_parts])
    progress = SegmentProgress(estimate_s, produced=sum(parts), handed=handed)
    assert progress.pending_s() >= progress.undelivered_s() >= 0
    assert progress.pending_s() + handed / SAMPLE_RATE >= estimate_s - 1e-9
