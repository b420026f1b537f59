"""The one cost model, for segments and for windows: pure arithmetic, no model, no sleeping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.scheduler.cost import SEGMENT_LEARNING_RATE, SEGMENT_SLOWDOWN_RATE, LinearCost, SegmentCost


def test_a_linear_cost_is_fitted_from_two_sizes_and_follows_the_load() -> None:
    cost = LinearCost.fit([(20, 0.1 + 20 * 0.01), (60, 0.1 + 60 * 0.01)])
    assert cost.fixed_s == pytest.approx(0.1) and cost.per_unit_s == pytest.approx(0.01)
    for _ in range(30):
        cost.observe(40, 2 * (0.1 + 40 * 0.01))  # the machine got twice as busy
    assert cost.scale == pytest.approx(2.0, rel=0.01)
    assert cost.predict(40) == pytest.approx(1.0, rel=0.01)
    assert cost.units_within(1.0) == pytest.approx(40, rel=0.01)


def test_a_linear_cost_needs_two_sizes_and_sane_values() -> None:
    with pytest.raises(ValueError, match="two sizes"):
        LinearCost.fit([(20, 0.3), (20, 0.31)])
    with pytest.raises(ValueError, match="per unit"):
        LinearCost(0.1, 0.0)
    with pytest.raises(ValueError, match="learning_rate"):
        LinearCost(0.1, 0.1, learning_rate=0)
    with pytest.raises(ValueError, match="slowdown_rate"):
        LinearCost(0.1, 0.1, slowdown_rate=1.5)


def test_a_slowdown_is_believed_at_its_own_rate_a_speedup_at_the_learning_rate() -> None:
    cost = LinearCost(0.1, 0.01, learning_rate=0.2, slowdown_rate=0.6)
    cost.observe(10, 3 * 0.2)  # three times slower than predicted
    assert cost.scale == pytest.approx(1 + 0.6 * 2)
    cost.observe(10, 1 * 0.2)  # back to the fitted speed
    assert cost.scale == pytest.approx(2.2 + 0.2 * (1 - 2.2))
    symmetric = LinearCost(0.1, 0.01, learning_rate=0.2)
    symmetric.observe(10, 3 * 0.2)
    assert symmetric.scale == pytest.approx(1 + 0.2 * 2)  # unless given, one rate for both


def test_one_outlier_moves_the_scale_only_within_its_clamp() -> None:
    cost = LinearCost(0.1, 0.01, learning_rate=1.0)
    cost.observe(10, 1000.0)
    assert cost.scale == 8.0
    cost.observe(10, 0.0)
    assert cost.scale == 0.25


def test_the_text_budget_grows_with_time_and_is_zero_below_the_overhead() -> None:
    cost = SegmentCost(LinearCost(0.5, 0.5), chars_per_s=14.0)
    assert cost.chars_within(0.25) == 0
    assert cost.chars_within(1.5) == 28  # 1.0 s of work → 2 s of audio → 28 chars
    assert cost.chars_within(1.5, speed=1.5) == 42
    assert cost.audio_s(28) == pytest.approx(2.0)
    assert cost.synthesis_s(2.0) == pytest.approx(1.5)


@given(overhead=st.floats(0.05, 1.5), rtf=st.floats(0.1, 2.0), chars_per_s=st.floats(8.0, 25.0))
def test_fit_recovers_a_segment_cost_from_its_own_timings(
    overhead: float, rtf: float, chars_per_s: float
) -> None:
    truth = SegmentCost(LinearCost(overhead, rtf), chars_per_s)
    samples = [(round(a * chars_per_s), a, truth.synthesis_s(a)) for a in (0.8, 2.5, 4.0)]
    fitted = SegmentCost.fit(samples)
    assert fitted.synthesis.per_unit_s == pytest.approx(rtf, rel=1e-6)
    assert fitted.synthesis.fixed_s == pytest.approx(overhead, rel=1e-6, abs=1e-9)
    assert fitted.chars_per_s == pytest.approx(chars_per_s, rel=0.05)


def test_fit_clamps_noise_to_plausible_values() -> None:
    fitted = SegmentCost.fit([(10, 1.0, 3.0), (40, 3.0, 0.1)])  # longer audio faster: a noisy machine
    assert fitted.synthesis.per_unit_s == 0.05
    assert 0.0 <= fitted.synthesis.fixed_s <= 2.0


def test_fit_needs_two_lengths() -> None:
    with pytest.raises(ValueError, match="two sizes"):
        SegmentCost.fit([(10, 1.0, 1.0), (10, 1.0, 1.1)])


def test_a_segment_cost_believes_a_slower_machine_sooner_than_a_faster_one() -> None:
    for cost in (SegmentCost(), SegmentCost.fit([(14, 1.0, 0.5), (42, 3.0, 1.1)])):
        predicted = cost.synthesis_s(2.0)
        cost.observe(chars=28, audio_s=2.0, took_s=2 * predicted)
        assert cost.synthesis.scale == pytest.approx(1 + SEGMENT_SLOWDOWN_RATE)
        cost.observe(chars=28, audio_s=2.0, took_s=predicted)  # the fitted speed again
        assert cost.synthesis.scale == pytest.approx(
            (1 + SEGMENT_SLOWDOWN_RATE) * (1 - SEGMENT_LEARNING_RATE) + SEGMENT_LEARNING_RATE
        )


def test_the_segment_cost_follows_a_slower_machine_and_ignores_silent_segments() -> None:
    cost = SegmentCost(LinearCost(0.3, 0.5, learning_rate=1.0), chars_per_s=14.0)
    cost.observe(chars=28, audio_s=2.0, took_s=3 * (0.3 + 2.0 * 0.5))  # the machine got 3x slower
    assert cost.synthesis_s(2.0) == pytest.approx(3 * 1.3)
    cost.observe(chars=10, audio_s=0.0, took_s=0.2)
    assert cost.synthesis_s(2.0) == pytest.approx(3 * 1.3)
