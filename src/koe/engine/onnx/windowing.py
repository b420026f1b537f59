"""How big the next vocoder window should be, and how windows are joined: pure, no model.

A window of ``n`` output frames is decoded with :data:`CONTEXT_FRAMES` extra frames on each side (so the
convolutions see what they would see in the whole decode) and costs ``fixed + per_frame × input frames``
seconds (a :class:`~koe.scheduler.cost.LinearCost` over input frames, measured at load and corrected as
windows run). The next window is the largest that finishes while the listener still has audio
(``ahead_s``) — large, and cheaper per frame, once the buffer has grown — but never smaller than the
smallest that leaves the listener more audio than it costs. Joins are crossfaded over
:data:`CROSSFADE_SAMPLES`, taken from the previous window's right context.
"""

from __future__ import annotations

import math

import numpy as np

from koe.engine.timing import FRAME_SAMPLES
from koe.scheduler.cost import LinearCost
from koe.types import SAMPLE_RATE, Audio

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


def input_span(start: int, end: int, total: int, context: int = CONTEXT_FRAMES) -> tuple[int, int]:
    """Frames stage B reads for output frames ``[start, end)``: the window plus its context, clipped."""
    return max(0, start - context), min(total, end + context)


def sustainable_frames(
    cost: LinearCost,
    *,
    context: int = CONTEXT_FRAMES,
    min_frames: int = MIN_WINDOW_FRAMES,
    max_frames: int = MAX_WINDOW_FRAMES,
) -> int | None:
    """The smallest window whose audio outlasts its cost with :data:`SAFETY`'s margin, so the listener's
    buffer grows while windows of it run; ``None`` when no window up to ``max_frames`` does.

    Each window pays the fixed cost and both contexts again, so on a loaded machine a small window can
    cost more than the audio it makes: sized only from a thin buffer, the first windows of a turn would
    each leave the listener less than before, until one is late (measured: 12-frame windows at
    0.088 s + 9.4 ms per input frame, 0.30 s of work for 0.30 s of audio, paused the opening for 0.1 s).
    """
    fixed = cost.predict(2 * context)
    per_frame = cost.predict(2 * context + 1) - fixed
    earned = SAFETY * FRAME_SAMPLES / SAMPLE_RATE - per_frame  # seconds of slack each frame adds
    if earned <= 0:
        return None
    frames = max(min_frames, math.ceil(fixed / earned))
    return frames if frames <= max_frames else None


def next_window_end(
    start: int,
    total: int,
    ahead_s: float,
    cost: LinearCost,
    *,
    previous: int = 0,
    context: int = CONTEXT_FRAMES,
    min_frames: int = MIN_WINDOW_FRAMES,
    max_frames: int = MAX_WINDOW_FRAMES,
) -> int:
    """End frame of the window starting at ``start``, sized to finish before ``ahead_s`` of audio plays.

    A window is never smaller than :func:`sustainable_frames`: when the buffer is too thin for it, it is
    still the step that leaves the listener the most. When no window is sustainable the listener will wait
    anyway, and small windows would only waste the machine on context and fixed cost: the window then
    doubles the ``previous`` one, so a machine slower than real time converges to the efficiency of whole
    decoding. Windows stay within ``[min_frames, max_frames]``; a remainder shorter than ``min_frames``
    joins the window before it.
    """
    if not 0 <= start < total:
        raise ValueError(f"window start {start} is outside 0..{total - 1}")
    frames = math.floor(cost.units_within(max(ahead_s, 0.0) * SAFETY)) - 2 * context
    floor = sustainable_frames(cost, context=context, min_frames=min_frames, max_frames=max_frames)
    if floor is not None:
        frames = max(frames, floor)
    elif frames < min_frames:
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
