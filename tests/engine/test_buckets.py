"""The torch engine's bucket ladders, without torch: where they end (derived from the model's limits), how
they grow, which bucket each width lands in, and what warming plans."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.engine.kmodel.buckets import (
    FRAME_FLOOR,
    FRAME_RUNGS,
    TOKEN_FLOOR,
    Buckets,
    fit,
    frame_cap,
    ladder,
    row_ladder,
    token_cap,
)
from koe.engine.vocab import kokoro_config
from koe.errors import ConfigError

BUCKETS = Buckets.for_model(kokoro_config()["max_dur"], 16)


def test_the_widest_passes_are_the_window_and_its_slowest_durations() -> None:
    """510 tokens and two padding tokens; each at most 50 frames (``max_dur``) at speed 1, 100 at 0.5."""
    assert token_cap() == 512
    assert frame_cap(50) == 512 * 100 == BUCKETS.frames[-1]
    assert frame_cap(50, min_speed=1.0) == 512 * 50
    assert BUCKETS.tokens == (16, 32, 64, 128, 256, 512)


@pytest.mark.parametrize("widths", [BUCKETS.tokens, BUCKETS.frames], ids=["tokens", "frames"])
def test_every_ladder_rises_from_its_floor_to_its_cap(widths: tuple[int, ...]) -> None:
    assert widths[0] in (TOKEN_FLOOR, FRAME_FLOOR)
    assert list(widths) == sorted(set(widths))


def test_frame_widths_grow_by_at_most_the_root_of_two_and_hold_every_doubling() -> None:
    step = 2 ** (1 / FRAME_RUNGS)
    ratios = [b / a for a, b in pairwise(BUCKETS.frames)]
    assert max(ratios) <= step + 0.02  # rounding to whole frames
    doublings = [FRAME_FLOOR << n for n in range(int(math.log2(BUCKETS.frames[-1] / FRAME_FLOOR)) + 1)]
    assert set(doublings) <= set(BUCKETS.frames)


def test_the_ratio_check_would_catch_a_coarser_ladder() -> None:
    """Control: powers of two break the √2 bound above."""
    coarse = ladder(FRAME_FLOOR, frame_cap(50), 1)
    assert max(b / a for a, b in pairwise(coarse)) > 2 ** (1 / FRAME_RUNGS) + 0.02


@pytest.mark.parametrize(
    "widths", [BUCKETS.rows, BUCKETS.tokens, BUCKETS.frames], ids=["rows", "tokens", "frames"]
)
def test_at_every_boundary_a_width_fills_its_bucket_and_one_more_takes_the_next(
    widths: tuple[int, ...],
) -> None:
    for smaller, larger in pairwise(widths):
        assert fit(widths, smaller) == smaller
        assert fit(widths, smaller + 1) == larger


@given(st.integers(min_value=1, max_value=frame_cap(50)))
def test_every_width_lands_in_the_smallest_bucket_that_holds_it(width: int) -> None:
    bucket = fit(BUCKETS.frames, width)
    assert bucket >= width
    assert all(smaller < width for smaller in BUCKETS.frames if smaller < bucket)


def test_a_width_past_the_cap_keeps_its_own_width() -> None:
    """Only a speed below the slowest a listener can ask for gets there: it runs, unbucketed."""
    assert fit(BUCKETS.frames, frame_cap(50) + 7) == frame_cap(50) + 7


@pytest.mark.parametrize(
    ("max_batch", "rows"), [(1, (1,)), (3, (1, 2, 3)), (16, (1, 2, 4, 8, 16)), (64, (1, 2, 4, 8, 16, 32, 64))]
)
def test_rows_are_padded_to_powers_of_two_and_the_largest_pass(max_batch: int, rows: tuple[int, ...]) -> None:
    assert row_ladder(max_batch) == rows


def test_warming_plans_every_bucket_within_its_limit_smallest_first() -> None:
    texts, acoustics = BUCKETS.plan(64)
    assert texts == [(1, 16), (1, 32), (2, 16), (1, 64), (2, 32), (4, 16)]
    assert acoustics == [(1, 32), (1, 45), (1, 64), (2, 32)]
    everything = BUCKETS.plan(16 * frame_cap(50))
    assert len(everything[1]) == len(BUCKETS.rows) * len(BUCKETS.frames)


@pytest.mark.parametrize(("floor", "cap", "rungs"), [(0, 8, 1), (8, 4, 1), (4, 8, 0)])
def test_a_ladder_that_cannot_rise_is_refused(floor: int, cap: int, rungs: int) -> None:
    with pytest.raises(ConfigError, match="expected 1 <= floor <= cap and rungs >= 1"):
        ladder(floor, cap, rungs)
