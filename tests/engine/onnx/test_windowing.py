"""Window planning and joins, without the model: windows tile the segment, follow the buffer, keep the
listener supplied, converge."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from koe.engine.onnx.windowing import (
    CONTEXT_FRAMES,
    MAX_WINDOW_FRAMES,
    MIN_WINDOW_FRAMES,
    MIN_WINDOWED_FRAMES,
    SAFETY,
    crossfade,
    input_span,
    next_window_end,
    sustainable_frames,
)
from koe.engine.timing import FRAME_SAMPLES
from koe.scheduler.cost import LinearCost
from koe.types import SAMPLE_RATE


def _plan(total: int, start: int, ahead: list[float], cost: LinearCost) -> list[tuple[int, int]]:
    windows: list[tuple[int, int]] = []
    previous = 0
    while start < total:
        end = next_window_end(start, total, ahead[len(windows) % len(ahead)], cost, previous=previous)
        windows.append((start, end))
        previous, start = end - start, end
    return windows


@given(
    total=st.integers(1, 2000),
    lead=st.integers(0, 30),
    ahead=st.lists(st.floats(-5, 30, allow_nan=False), min_size=1, max_size=8),
    fixed=st.floats(0, 0.5),
    per_frame=st.floats(0.001, 0.1),
)
def test_windows_tile_the_segment_within_size_bounds(
    total: int, lead: int, ahead: list[float], fixed: float, per_frame: float
) -> None:
    start = min(lead, total - 1)
    windows = _plan(total, start, ahead, LinearCost(fixed, per_frame))
    assert windows[0][0] == start and windows[-1][1] == total
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))
    for begin, end in windows:
        assert end > begin
        assert end - begin <= MAX_WINDOW_FRAMES + MIN_WINDOW_FRAMES  # a short remainder may join the last
    assert all(end - begin >= MIN_WINDOW_FRAMES for begin, end in windows[:-1])


def test_more_buffered_audio_gives_larger_windows() -> None:
    cost = LinearCost(0.05, 0.005)
    sizes = [next_window_end(0, 10_000, ahead, cost, previous=MIN_WINDOW_FRAMES) for ahead in (0.6, 1.2, 2.4)]
    assert sizes[0] < sizes[1] < sizes[2] <= MAX_WINDOW_FRAMES
    predicted = cost.predict(sizes[1] + 2 * CONTEXT_FRAMES)
    assert predicted <= 1.2  # the window finishes while the listener still has audio


def _underruns(total: int, cost: LinearCost) -> list[float]:
    """Decode a segment window by window, each costing what ``cost`` predicts, for a listener who starts
    playing when the first window arrives: how long each later window kept the listener waiting."""
    clock, played_until, start, previous, waits = 0.0, 0.0, 0, 0, []
    while start < total:
        end = next_window_end(start, total, max(played_until - clock, 0.0), cost, previous=previous)
        low, high = input_span(start, end, total)
        clock += cost.predict(high - low)
        if start and clock > played_until:
            waits.append(clock - played_until)
        played_until = max(played_until, clock) + (end - start) * FRAME_SAMPLES / SAMPLE_RATE
        previous, start = end - start, end
    return waits


@given(
    total=st.integers(MIN_WINDOWED_FRAMES, 1500),
    fixed=st.floats(0.01, 0.2),
    per_frame=st.floats(0.001, 0.012),
)
def test_windows_sized_by_the_plan_never_let_a_listener_run_dry(
    total: int, fixed: float, per_frame: float
) -> None:
    cost = LinearCost(fixed, per_frame)
    assume(sustainable_frames(cost) is not None)
    assert _underruns(total, cost) == []


def test_a_loaded_machine_opens_with_a_window_that_grows_the_buffer() -> None:
    cost = LinearCost(0.088, 0.0094)  # measured on this project's 2 cores under load
    floor = sustainable_frames(cost)
    assert floor is not None and floor > MIN_WINDOW_FRAMES
    end = next_window_end(0, 200, 0.3, cost)  # only the leading silence is buffered
    assert end == floor
    audio_s = floor * FRAME_SAMPLES / SAMPLE_RATE
    assert cost.predict(floor + 2 * CONTEXT_FRAMES) <= SAFETY * audio_s
    assert (
        cost.predict(MIN_WINDOW_FRAMES + 2 * CONTEXT_FRAMES)
        > SAFETY * MIN_WINDOW_FRAMES * FRAME_SAMPLES / SAMPLE_RATE
    )
    assert sustainable_frames(LinearCost(0.02, 0.002)) == MIN_WINDOW_FRAMES  # a quick machine starts small


def test_a_machine_slower_than_real_time_doubles_windows_instead_of_shrinking_them() -> None:
    cost = LinearCost(0.3, 0.05)  # 2 s of work per second of audio: every window will stall anyway
    windows = _plan(400, 0, [0.0], cost)
    sizes = [end - begin for begin, end in windows]
    assert sizes[:4] == [MIN_WINDOW_FRAMES * factor for factor in (1, 2, 4, 8)]
    assert max(sizes) <= MAX_WINDOW_FRAMES + MIN_WINDOW_FRAMES


def test_window_start_outside_the_segment_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        next_window_end(10, 10, 1.0, LinearCost(0.1, 0.01))


def test_context_is_clipped_at_the_segment_edges() -> None:
    assert input_span(0, 12, 100) == (0, 12 + CONTEXT_FRAMES)
    assert input_span(50, 62, 100) == (50 - CONTEXT_FRAMES, 62 + CONTEXT_FRAMES)
    assert input_span(90, 100, 100) == (90 - CONTEXT_FRAMES, 100)


@given(length=st.integers(1, 700), extra=st.integers(0, 2000))
def test_crossfade_keeps_length_and_moves_from_tail_to_head(length: int, extra: int) -> None:
    tail = np.ones(length, dtype=np.float32)
    head = np.zeros(length + extra, dtype=np.float32)
    joined = crossfade(tail, head)
    assert joined.size == head.size and joined.dtype == np.float32
    assert np.all(np.diff(joined[:length]) <= 0)  # fades out the tail monotonically
    assert 0 < joined[0] < 1 and 0 <= joined[length - 1] < 1
    assert np.all(joined[length:] == 0)


def test_crossfade_of_identical_signals_is_the_signal() -> None:
    signal = np.sin(np.arange(1200, dtype=np.float32) / 7)
    assert np.allclose(crossfade(signal[:600].copy(), signal), signal, atol=1e-6)
    assert crossfade(np.zeros(0, dtype=np.float32), signal) is signal
    with pytest.raises(ValueError, match="crossfade"):
        crossfade(signal, signal[:10])
