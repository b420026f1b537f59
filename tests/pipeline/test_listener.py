"""The listener's one account of audio: the playback clock, segments in flight, deadlines; no sleeping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.pipeline.listener import Listener, PlaybackClock, Progress
from koe.types import SAMPLE_RATE


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_fresh_listener_needs_audio_now() -> None:
    playback = PlaybackClock(Clock())
    assert playback.deadline() == 100.0
    assert playback.ahead_s() == 0.0


def test_delivered_audio_pushes_the_deadline_and_drains_in_real_time() -> None:
    clock = Clock()
    playback = PlaybackClock(clock)
    playback.delivered(2.0)
    assert playback.deadline() == 102.0
    assert playback.deadline(pending_audio_s=1.5) == 103.5
    clock.t = 101.5
    assert playback.ahead_s() == pytest.approx(0.5)
    playback.delivered(1.0)  # arrives before the listener ran dry: queued behind what it still has
    assert playback.deadline() == pytest.approx(103.0)


def test_a_listener_that_ran_dry_restarts_from_the_next_arrival() -> None:
    clock = Clock()
    playback = PlaybackClock(clock)
    playback.delivered(1.0)
    clock.t = 105.0
    assert playback.ahead_s() == 0.0
    playback.delivered(1.0)
    assert playback.deadline() == 106.0


def test_pending_audio_is_the_estimate_until_a_part_is_handed_out() -> None:
    progress = Progress(estimate_s=2.0)
    progress.produced = SAMPLE_RATE // 2
    assert progress.pending_s() == 2.0 and progress.undelivered_s() == 0.5
    progress.handed = SAMPLE_RATE // 2
    assert progress.pending_s() == 1.5 and progress.undelivered_s() == 0.0


def test_a_segment_longer_than_its_estimate_still_counts_what_waits() -> None:
    progress = Progress(estimate_s=1.0, produced=3 * SAMPLE_RATE, handed=SAMPLE_RATE)
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
    progress = Progress(estimate_s, produced=sum(parts), handed=handed)
    assert progress.pending_s() >= progress.undelivered_s() >= 0
    assert progress.pending_s() + handed / SAMPLE_RATE >= estimate_s - 1e-9


def test_each_segment_is_due_when_the_audio_ahead_of_it_runs_out() -> None:
    clock = Clock()
    listener = Listener(clock)
    first, second = listener.track(2.0), listener.track(3.0)
    assert listener.deadline(first) == 100.0  # nothing playing, nothing ahead: due now
    assert listener.deadline(second) == 102.0  # behind the first segment's estimated 2 s
    assert listener.budget_s() == pytest.approx(5.0)
    listener.produced(first, SAMPLE_RATE)  # the first has made 1 s, not yet handed over
    assert listener.buffered_s() == pytest.approx(1.0)
    listener.handed(first, SAMPLE_RATE)  # ...and now it plays
    assert listener.ahead_s() == pytest.approx(1.0) and listener.buffered_s() == pytest.approx(1.0)
    assert listener.deadline(second) == pytest.approx(102.0)  # 1 s playing + 1 s of the first to come
    listener.forget(first)
    assert listener.deadline(second) == pytest.approx(101.0)


def test_a_dropped_segment_takes_its_undelivered_audio_with_it() -> None:
    listener = Listener(Clock())
    progress = listener.track(1.0)
    listener.produced(progress, 2 * SAMPLE_RATE)
    listener.forget(progress)
    listener.forget(progress)  # idempotent
    assert listener.buffered_s() == 0.0 and listener.pending_s() == 0.0
