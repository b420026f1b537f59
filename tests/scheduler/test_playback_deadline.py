"""Playback clock and cost model: pure arithmetic over an injected clock, no sleeping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.scheduler.deadline import CostModel, CostTracker, PlaybackClock


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_fresh_listener_needs_audio_now() -> None:
    clock = Clock()
    playback = PlaybackClock(clock)
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


def test_the_text_budget_grows_with_time_and_is_zero_below_the_overhead() -> None:
    model = CostModel(overhead_s=0.5, rtf=0.5, chars_per_s=14.0)
    assert model.chars_within(0.25) == 0
    assert model.chars_within(1.5) == 28  # 1.0 s of work → 2 s of audio → 28 chars
    assert model.chars_within(1.5, speed=1.5) == 42
    assert model.audio_s(28) == pytest.approx(2.0)
    assert model.synthesis_s(2.0) == pytest.approx(1.5)


@given(
    overhead=st.floats(0.05, 1.5),
    rtf=st.floats(0.1, 2.0),
    chars_per_s=st.floats(8.0, 25.0),
)
def test_fit_recovers_a_model_from_its_own_timings(overhead: float, rtf: float, chars_per_s: float) -> None:
    truth = CostModel(overhead, rtf, chars_per_s)
    samples = [(round(a * chars_per_s), a, truth.synthesis_s(a)) for a in (0.8, 2.5, 4.0)]
    fitted = CostModel.fit(samples)
    assert fitted.rtf == pytest.approx(rtf, rel=1e-6)
    assert fitted.overhead_s == pytest.approx(overhead, rel=1e-6)
    assert fitted.chars_per_s == pytest.approx(chars_per_s, rel=0.05)


def test_fit_clamps_noise_to_plausible_values() -> None:
    fitted = CostModel.fit([(10, 1.0, 3.0), (40, 3.0, 0.1)])  # longer audio faster: a noisy machine
    assert fitted.rtf == 0.05
    assert 0.0 <= fitted.overhead_s <= 2.0


def test_fit_needs_two_lengths() -> None:
    with pytest.raises(ValueError, match="two audio lengths"):
        CostModel.fit([(10, 1.0, 1.0), (10, 1.0, 1.1)])


def test_the_tracker_follows_a_slower_machine_and_ignores_silent_jobs() -> None:
    tracker = CostTracker(CostModel(overhead_s=0.3, rtf=0.5, chars_per_s=14.0), weight=0.5)
    tracker.observe(chars=28, audio_s=2.0, took_s=0.3 + 2.0 * 1.5)  # the machine got 3x slower
    assert tracker.model.rtf == pytest.approx(1.0)
    assert tracker.model.overhead_s == 0.3
    tracker.observe(chars=10, audio_s=0.0, took_s=0.2)
    assert tracker.model.rtf == pytest.approx(1.0)
    with pytest.raises(ValueError, match="weight"):
        CostTracker(CostModel(), weight=0)
