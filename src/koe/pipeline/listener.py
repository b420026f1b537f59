"""The one account of what a listener has: audio playing, audio made but not handed over, audio on its way.

A listener plays audio in real time from the moment it is handed over and waits when it has none
(:class:`PlaybackClock`). A session's turns share one :class:`Listener`; each segment in flight is tracked
from the moment it is queued (its estimated length) until its last sample is handed over. From that one
account come every deadline (when the listener runs out, given what is ahead of a job), every window size
(how much audio is buffered) and every segment-length hint.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from koe.types import SAMPLE_RATE


class PlaybackClock:
    """Follows one listener that plays audio in real time from its arrival and waits when it has none.

    Args:
        now: the monotonic clock (injectable so tests need not sleep).
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._until = -math.inf

    def delivered(self, audio_s: float) -> None:
        """``audio_s`` seconds more were handed to the listener."""
        self._until = max(self._now(), self._until) + audio_s

    def ahead_s(self) -> float:
        """Seconds of audio the listener still has to play (0 when it is waiting)."""
        return max(0.0, self._until - self._now())

    def deadline(self, pending_audio_s: float = 0.0) -> float:
        """When the listener needs the next audio, given ``pending_audio_s`` already on its way to it.

        With nothing playing and nothing pending this is *now*: a turn's first segment is due at once.
        """
        return max(self._now(), self._until) + pending_audio_s


@dataclass(eq=False, slots=True)
class Progress:
    """Where one segment in flight stands: its estimated length, its samples produced and handed over."""

    estimate_s: float
    produced: int = 0
    handed: int = 0

    def undelivered_s(self) -> float:
        """Audio produced and not yet handed over."""
        return (self.produced - self.handed) / SAMPLE_RATE

    def pending_s(self) -> float:
        """Audio still to be handed over: the estimate until a part is (as a whole segment always counted),
        then the estimate less what was, but never less than what waits."""
        if not self.handed:
            return self.estimate_s
        return max(self.estimate_s - self.handed / SAMPLE_RATE, self.undelivered_s())


class Listener:
    """One listener's audio: the clock, and every segment in flight for it, in the order it will hear them.

    Used on the event loop, except :meth:`buffered_s`, which worker threads read while sizing windows.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.clock = PlaybackClock(now)
        self._in_flight: list[Progress] = []
        self._undelivered = 0  # samples produced and not yet handed over, over every segment in flight

    def ahead_s(self) -> float:
        """Audio handed over and not yet played."""
        return self.clock.ahead_s()

    def buffered_s(self) -> float:
        """Audio the listener has in hand or made for it (thread-safe: it only reads)."""
        return self.clock.ahead_s() + self._undelivered / SAMPLE_RATE

    def pending_s(self, before: Progress | None = None) -> float:
        """Audio on its way ahead of ``before`` (of every segment in flight if ``None``)."""
        total = 0.0
        for progress in self._in_flight:
            if progress is before:
                break
            total += progress.pending_s()
        return total

    def budget_s(self) -> float:
        """How long the listener can go on before it runs out: what it has and what is on its way."""
        return self.clock.ahead_s() + self.pending_s()

    def deadline(self, progress: Progress) -> float:
        """When ``progress``'s next audio is needed: after what is ahead of it and its own waiting audio."""
        return self.clock.deadline(self.pending_s(before=progress) + progress.undelivered_s())

    def track(self, estimate_s: float) -> Progress:
        """A segment is queued behind every one in flight."""
        progress = Progress(estimate_s)
        self._in_flight.append(progress)
        return progress

    def produced(self, progress: Progress, samples: int) -> None:
        progress.produced += samples
        self._undelivered += samples

    def handed(self, progress: Progress, samples: int) -> None:
        """``samples`` of the segment go to the listener now: they start playing after what it has."""
        progress.handed += samples
        self._undelivered -= samples
        self.clock.delivered(samples / SAMPLE_RATE)

    def forget(self, progress: Progress) -> None:
        """The segment is spoken, or dropped: whatever of it was not handed over never will be."""
        if progress in self._in_flight:
            self._in_flight.remove(progress)
            self._undelivered -= progress.produced - progress.handed
