"""Window planning and joins, without the model: windows tile the segment, follow the buffer, keep the
listener supplied, converge."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from koe.engine.onnx.windowing import (
    CONTEXT_FRAMES,
    LEAD_CONTEXT_FRAMES,
    MAX_WINDOW_FRAMES,
    MIN_WINDOW_FRAMES,
    MIN_WINDOWED_FRAMES,
    OVERRUN,
    SAFETY,
    crossfade,
    input_span,
    next_window_end,
    steady_buffer_s,
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


FRAME_S = FRAME_SAMPLES / SAMPLE_RATE
#: Measured on this project's 2 cores under load (docs/engine.md, "Window sizes").
LOADED = LinearCost(0.088, 0.0094)


def _underruns(total: int, cost: LinearCost) -> list[float]:
    """Decode a segment window by window, each costing what ``cost`` predicts, for a listener who starts
    playing when the first window arrives: how long each later window kept the listener waiting."""
    clock, played_until, start, previous, waits = 0.0, 0.0, 0, 0, []
    while start < total:
        ahead = max(played_until - clock, 0.0)
        end = next_window_end(start, total, ahead, cost, previous=previous, first=not start)
        low, high = input_span(start, end, total)
        clock += cost.predict(high - low)
        if start and clock > played_until:
            waits.append(clock - played_until)
        played_until = max(played_until, clock) + (end - start) * FRAME_S
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
    assume(steady_buffer_s(cost) is not None)
    assert _underruns(total, cost) == []


def _left_after(ahead_s: float, frames: int, cost: LinearCost, left: int) -> float:
    """The audio a listener has when a window of ``frames`` (``left`` frames of context before it) is done."""
    return max(ahead_s - cost.predict(frames + left + CONTEXT_FRAMES), 0.0) + frames * FRAME_S


def _windows_after(start: int, ahead_s: float, cost: LinearCost, overrun: float) -> list[float]:
    """From ``ahead_s`` of audio, windows to frame 2000 each costing ``overrun`` × the prediction: the
    audio the listener has when each is done (negative: it ran dry); each is asserted on time by SAFETY."""
    clock, played_until, end, previous, buffers = 0.0, ahead_s, start, 0, []
    while end < 2000:
        ahead = played_until - clock
        start, end = end, next_window_end(end, 2000, ahead, cost, previous=previous)
        low, high = input_span(start, end, 2000)
        assert cost.predict(high - low) <= SAFETY * ahead + 1e-9
        clock += overrun * cost.predict(high - low)
        played_until += (end - start) * FRAME_S
        buffers.append(played_until - clock)
        previous = end - start
    return buffers


def test_an_opening_window_is_the_smallest_that_leaves_the_steady_buffer() -> None:
    """With only the leading silence buffered, the first window is no larger than the steady buffer asks —
    smaller than one that earns the whole margin on its own (what a loaded machine opened with before, the
    first word later for it) — and every window after it is on time and the buffer grows, even when each
    costs OVERRUN × its prediction."""
    lead_s, start = 0.3, 12
    steady = steady_buffer_s(LOADED)
    assert steady is not None
    end = next_window_end(start, 200, lead_s, LOADED, left=LEAD_CONTEXT_FRAMES, first=True)
    frames = end - start
    assert _left_after(lead_s, frames, LOADED, LEAD_CONTEXT_FRAMES) >= steady
    assert _left_after(lead_s, frames - 1, LOADED, LEAD_CONTEXT_FRAMES) < steady
    on_its_own = next(
        n for n in range(1, 200) if LOADED.predict(n + 2 * CONTEXT_FRAMES) <= SAFETY * n * FRAME_S
    )
    assert MIN_WINDOW_FRAMES < frames < on_its_own
    for overrun in (1.0, OVERRUN):
        buffers = _windows_after(
            end, _left_after(lead_s, frames, LOADED, LEAD_CONTEXT_FRAMES), LOADED, overrun
        )
        assert min(buffers) > 0
        assert buffers[-1] > 2 * buffers[0]


def test_below_the_steady_buffer_only_the_first_window_may_be_planned_late() -> None:
    """A first window may keep the listener waiting (before the first word); a later one is not planned
    past the buffer to restore the steady buffer — that would be a pause after speech began — but is the
    largest on time even at OVERRUN × its predicted cost."""
    steady = steady_buffer_s(LOADED)
    assert steady is not None
    ahead = 0.75 * steady
    first = next_window_end(100, 2000, ahead, LOADED, first=True) - 100
    later = next_window_end(100, 2000, ahead, LOADED) - 100
    assert _left_after(ahead, first, LOADED, CONTEXT_FRAMES) >= steady  # restores it, whatever it costs
    assert MIN_WINDOW_FRAMES < later < first
    assert OVERRUN * LOADED.predict(later + 2 * CONTEXT_FRAMES) <= ahead
    assert OVERRUN * LOADED.predict(later + 1 + 2 * CONTEXT_FRAMES) > ahead
    greedy = math.floor(LOADED.units_within(SAFETY * ahead)) - 2 * CONTEXT_FRAMES
    assert later > greedy  # still more than SAFETY alone allows: it builds the buffer back


def test_the_steady_buffer_grows_with_the_cost_and_vanishes_slower_than_real_time() -> None:
    quick, loaded = steady_buffer_s(LinearCost(0.02, 0.002)), steady_buffer_s(LOADED)
    assert quick is not None and loaded is not None and quick < loaded
    slow = LinearCost(0.088, 0.0094)
    slow.observe(24, 3 * slow.predict(24))  # the machine got slower: scale × 1.6
    bigger = steady_buffer_s(slow)
    assert bigger is not None and bigger > loaded
    assert steady_buffer_s(LinearCost(0.05, FRAME_S)) is None  # a frame costs its own length


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
    assert input_span(12, 30, 100, left=LEAD_CONTEXT_FRAMES) == (
        12 - LEAD_CONTEXT_FRAMES,
        30 + CONTEXT_FRAMES,
    )


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
