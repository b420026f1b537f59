"""How big the next vocoder window should be, and how windows are joined: pure, no model.

A window of ``n`` output frames is decoded with :data:`CONTEXT_FRAMES` extra frames on each side (so the
convolutions see what they would see in the whole decode) and costs ``fixed + per_frame × input frames``
seconds (:class:`CostModel`, measured at load and corrected as windows run). The next window is the largest
that finishes while the listener still has audio (``ahead_s``): small while the buffer is thin, large — and
cheaper per frame — once it has grown. Joins are crossfaded over :data:`CROSSFADE_SAMPLES`, taken from the
previous window's right context.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np

from koe.engine.timing import FRAME_SAMPLES
from koe.types import Audio

#: Frames of context decoded on each side of a window. Measured against a whole decode with the same
#: statistics, joins exceed the rest of the utterance by 0.6 dB log-mel with 4 frames, 0.3 dB with 6 and
#: 0.1 dB with 8 (docs/engine.md): 6 keeps the first window cheap and its joins unremarkable.
CONTEXT_FRAMES = 6
#: The leading padding token is silence, except its last frames, where the first phoneme's onset already
#: sounds (measured: the last 2 frames); these are decoded, the frames before them emitted as zeros.
LEAD_DECODED_FRAMES = 4
#: One frame (25 ms) of linear crossfade at each join.
CROSSFADE_SAMPLES = FRAME_SAMPLES
#: Segments shorter than this (2.5 s of audio) decode whole: their statistics are the hardest to estimate
#: (a 61-frame "Hello there." came out 9.8 dB log-mel from the whole decode, against ≤ 3 dB from 100
#: frames on; docs/engine.md) and the whole decode of one is quick anyway.
MIN_WINDOWED_FRAMES = 100
#: Smallest window (0.3 s of audio): below it the fixed cost per run dominates.
MIN_WINDOW_FRAMES = 12
#: Largest window (4 s): bounds memory per run and how long one step holds a worker.
MAX_WINDOW_FRAMES = 160
#: Plan to finish a window when this share of the listener's buffered audio has played.
SAFETY = 0.7
#: Weight of the newest measurement in the running correction of the cost model.
_LEARNING_RATE = 0.3
_MIN_SCALE, _MAX_SCALE = 0.25, 8.0


class CostModel:
    """Seconds to decode a window: ``(fixed_s + per_frame_s × input_frames) × scale``.

    ``fixed_s``/``per_frame_s`` are fitted at load; ``scale`` follows the machine's current load (other
    sessions, other processes) from every window actually decoded. Thread-safe.
    """

    def __init__(self, fixed_s: float, per_frame_s: float) -> None:
        if not (math.isfinite(fixed_s) and math.isfinite(per_frame_s)) or fixed_s < 0 or per_frame_s <= 0:
            raise ValueError(f"cost model needs fixed ≥ 0, per frame > 0 s; got {fixed_s}, {per_frame_s}")
        self.fixed_s = fixed_s
        self.per_frame_s = per_frame_s
        self._scale = 1.0
        self._lock = threading.Lock()

    @classmethod
    def fit(cls, samples: Sequence[tuple[int, float]]) -> CostModel:
        """Least-squares line through ``(input_frames, seconds)`` measurements (at least two sizes)."""
        frames = np.array([f for f, _ in samples], dtype=np.float64)
        seconds = np.array([s for _, s in samples], dtype=np.float64)
        if len(set(frames.tolist())) < 2:
            raise ValueError("fitting a cost model needs windows of at least two sizes")
        slope, intercept = np.polyfit(frames, seconds, 1)
        per_frame = max(float(slope), 1e-4)
        fixed = max(float(intercept), 0.0)
        return cls(fixed, per_frame)

    @property
    def scale(self) -> float:
        return self._scale

    def predict(self, input_frames: int) -> float:
        return (self.fixed_s + self.per_frame_s * input_frames) * self._scale

    def observe(self, input_frames: int, seconds: float) -> None:
        """Fold a measured window into ``scale`` (exponential average, clamped against outliers)."""
        base = self.fixed_s + self.per_frame_s * input_frames
        ratio = min(max(seconds / base, _MIN_SCALE), _MAX_SCALE)
        with self._lock:
            self._scale += _LEARNING_RATE * (ratio - self._scale)

    def frames_within(self, seconds: float) -> int:
        """The most input frames a window may have to finish within ``seconds`` (may be ≤ 0)."""
        return math.floor((seconds / self._scale - self.fixed_s) / self.per_frame_s)


def input_span(start: int, end: int, total: int, context: int = CONTEXT_FRAMES) -> tuple[int, int]:
    """Frames stage B reads for output frames ``[start, end)``: the window plus its context, clipped."""
    return max(0, start - context), min(total, end + context)


def next_window_end(
    start: int,
    total: int,
    ahead_s: float,
    cost: CostModel,
    *,
    previous: int = 0,
    context: int = CONTEXT_FRAMES,
    min_frames: int = MIN_WINDOW_FRAMES,
    max_frames: int = MAX_WINDOW_FRAMES,
) -> int:
    """End frame of the window starting at ``start``, sized to finish before ``ahead_s`` of audio plays.

    When even ``min_frames`` cannot finish in time the listener will wait anyway, and small windows would
    only waste the machine on context and fixed cost: the window then doubles the ``previous`` one, so a
    machine slower than real time converges to the efficiency of whole decoding. Windows stay within
    ``[min_frames, max_frames]``; a remainder shorter than ``min_frames`` joins the window before it.
    """
    if not 0 <= start < total:
        raise ValueError(f"window start {start} is outside 0..{total - 1}")
    frames = cost.frames_within(max(ahead_s, 0.0) * SAFETY) - 2 * context
    if frames < min_frames:
        frames = 2 * previous
    frames = min(max(frames, min_frames), max_frames)
    end = min(total, start + frames)
    if total - end < min_frames:
        end = total
    return end


def crossfade(tail: Audio, head: Audio) -> Audio:
    """``head`` with its first ``len(tail)`` samples faded in from ``tail`` (the same audio, decoded by the
    previous window): a linear ramp, since both sides are nearly identical and correlated."""
    if tail.size == 0:
        return head
    if tail.size > head.size:
        raise ValueError(f"crossfade of {tail.size} samples into a {head.size}-sample window")
    ramp = (np.arange(1, tail.size + 1, dtype=np.float32) / np.float32(tail.size + 1)).astype(np.float32)
    joined = head.copy()
    joined[: tail.size] = tail * (1 - ramp) + head[: tail.size] * ramp
    return joined
