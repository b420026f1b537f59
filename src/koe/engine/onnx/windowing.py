"""How big the next vocoder window should be, and how windows are joined: pure, no model.

A window of ``n`` output frames is decoded with :data:`CONTEXT_FRAMES` extra frames on each side (so the
convolutions see what they would see in the whole decode) and costs ``fixed + per_frame × input frames``
seconds (a :class:`~koe.scheduler.cost.LinearCost` over input frames, measured at load and corrected as
windows run). The next window is the largest that finishes while the listener still has audio
(``ahead_s``) — large, and cheaper per frame, once the buffer has grown — but never smaller than the
smallest that leaves the listener the *steady buffer* after it, from which every later window is on time
and the buffer grows (:func:`steady_buffer_s`). So the first window of a turn, whose delay the listener
hears only as a later start, is as small as lets the windows after it keep up. Joins are crossfaded over
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
#: The first window's left context lies in the leading pad's silence, where 2 frames give its first frames
#: as 6 do (without any its first frame clicks: measured on 3 voices × 4 sentences).
LEAD_CONTEXT_FRAMES = 2
#: Segments shorter than this (2 s of audio) decode whole: their statistics are the hardest to estimate (a
#: 61-frame "Hello there." came out 9.8 dB log-mel from the whole decode, against ≤ 3.3 dB from 83 frames
#: on; docs/engine.md). Not higher: an agent's six-word first sentence (~2 s) is a streamed turn's whole first
#: segment, and decoded whole its first word waits for all of it.
MIN_WINDOWED_FRAMES = 80
#: Smallest window (0.3 s of audio): below it the fixed cost per run dominates.
MIN_WINDOW_FRAMES = 12
#: Largest window (4 s): bounds memory per run and how long one step holds a worker.
MAX_WINDOW_FRAMES = 160
#: Plan to finish a window when this share of the listener's buffered audio has played.
SAFETY = 0.6
#: How much slower than predicted windows may run, one after another, with the listener's buffer still
#: growing (:func:`steady_buffer_s`): the cost model follows a change of load only over a few windows, so
#: a turn's first windows right after other work, and runs of windows under load, take longer than predicted.
OVERRUN = 1.3
_FRAME_S = FRAME_SAMPLES / SAMPLE_RATE


def input_span(
    start: int, end: int, total: int, context: int = CONTEXT_FRAMES, *, left: int | None = None
) -> tuple[int, int]:
    """Frames stage B reads for output frames ``[start, end)``: the window plus its context (``left`` frames
    before it where given), clipped to the segment."""
    return max(0, start - (context if left is None else left)), min(total, end + context)


def steady_buffer_s(cost: LinearCost, *, context: int = CONTEXT_FRAMES) -> float | None:
    """The listener's buffer from which windows sized to finish within :data:`SAFETY` of it make it grow,
    even when every one costs :data:`OVERRUN` times its prediction; ``None`` when no buffer does (each frame
    costs more than ``1 / OVERRUN`` of its audio).

    From a buffer ``b`` the next window is predicted to cost ``SAFETY × b``; it adds its audio. Each window
    pays the fixed cost and both contexts (``overhead``) besides its frames, so its audio outgrows
    ``OVERRUN`` times its cost only when ``b`` is large enough: ``b ≥ frame·overhead / (SAFETY·(frame −
    OVERRUN·per_frame))``, per frame of audio ``frame`` and of work ``per_frame``.
    """
    overhead = cost.predict(2 * context)  # the fixed cost and both contexts
    slack = _FRAME_S - OVERRUN * cost.per_unit_s * cost.scale  # what a frame leaves beyond its cost
    if slack <= 0:
        return None
    return _FRAME_S * overhead / (SAFETY * slack)


def next_window_end(
    start: int,
    total: int,
    ahead_s: float,
    cost: LinearCost,
    *,
    previous: int = 0,
    context: int = CONTEXT_FRAMES,
    left: int | None = None,
    first: bool = False,
    min_frames: int = MIN_WINDOW_FRAMES,
    max_frames: int = MAX_WINDOW_FRAMES,
) -> int:
    """End frame of the window starting at ``start`` (``left`` frames of context before it where given),
    for a listener with ``ahead_s`` of audio; ``first``: the window before the listener's first word.

    The window is the largest that finishes within :data:`SAFETY` of ``ahead_s``, but never smaller than
    the smallest that leaves the listener :func:`steady_buffer_s` after it (the audio still buffered when
    it is done, plus its own): from that buffer the windows after it keep the listener supplied and grow
    larger. So a turn's first window, with only the leading silence buffered, is as small as lets every
    later window be on time: it may keep the listener waiting before the first word, never after it. A
    later window is never planned to run past ``ahead_s`` over :data:`OVERRUN` to restore the steady
    buffer (the listener would hear that as a pause): below it, the window is the largest that is on
    time even when it costs that much more than predicted.
    When no buffer lets windows grow (or only windows beyond ``max_frames`` would reach it), the listener
    will wait anyway, and small windows would only waste the machine on context and fixed cost: a window
    too small for ``min_frames`` then doubles the ``previous`` one, so a machine slower than real time
    converges to the efficiency of whole decoding. Windows stay within
    ``[min_frames, max_frames]``; a remainder shorter than ``min_frames`` joins the window before it.
    """
    if not 0 <= start < total:
        raise ValueError(f"window start {start} is outside 0..{total - 1}")
    ahead_s = max(ahead_s, 0.0)
    low, _ = input_span(start, start, total, context, left=left)
    overhead = start - low + context  # input frames besides the window's own (the right side unclipped)
    frames = math.floor(cost.units_within(ahead_s * SAFETY)) - overhead
    steady = steady_buffer_s(cost, context=context)
    enough = None if steady is None else next(
        (n for n in range(min_frames, max_frames + 1)
         if max(ahead_s - cost.predict(n + overhead), 0.0) + n * _FRAME_S >= steady),
        None,
    )  # fmt: skip
    if enough is not None:
        on_time = math.floor(cost.units_within(ahead_s / OVERRUN)) - overhead
        frames = max(frames, enough if first else min(enough, on_time))
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
