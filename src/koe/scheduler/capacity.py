"""Admission by the machine's speed: a newcomer is refused before it would make every listener hear gaps.

A listener being spoken to needs about one second of audio per second: it plays in real time whatever its
speed (speed changes how much text a second of audio holds, not how fast it plays). A request that is not
streamed (``POST /invocations``, OpenAI's speech route) counts as one too: its jobs are planned against a
listener's account of its own (first segment due at once, each later one as if the earlier were playing),
so it takes the share of the machine a listener does for as long as its audio is being made.

What the machine gives is priced in CPU: the audio-seconds this process makes per CPU-second it spends
(:class:`AudioPerCpu`), times the cores its calls can use (``cores``: the usable cores, or the workers ×
threads where those are fewer). That figure hardly moves with the number of listeners (2.3, 2.0 and 2.0
audio-s per CPU-s for one, two and three on the 2-core machine, docs/benchmarks/capacity.json), where a
call's wall speed does: a lone call has both cores, two calls at once each half. A figure of wall speed
learned alone overstates what the machine gives by about that factor, and one learned under load
understates it.

A newcomer is refused (``over_capacity``, routed as ``queue_saturated`` is) when the listeners then being
spoken to would need more than ``share`` of what the machine gives. Never refused: the first listener
(nobody's audio is at stake), and any listener while the meter holds no figure (until
:data:`WINDOW_AUDIO_S` of audio has been made for listeners after the first segment: the CPU of loading
and warming the model made no listener's audio).

What the CPU figure does not see: a neighbour process taking cores (the figure is this process's own
cost), and CPU this process spends on other work than speech (the local LLM of the page's agent, openers
being pre-cached), which it charges to the audio made meanwhile. On a GPU the engine's passes cost the
host little CPU, so the figure overstates what the device gives; there the queue's bound
(``queue_saturated``) is what refuses.

What is checked is a *seat* (:class:`Seat`): a session is checked when its first turn starts to speak;
its later turns are not (an agent's next answer refused mid-conversation is worse than a conversation
refused at its start), but each counts while it speaks. A request is a seat of its own.

Loop-only: every method is called on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from koe.errors import OverloadedError

#: Audio-seconds per second one listener needs: it plays in real time.
LISTENER_NEED = 1.0
#: The refusal's code (:mod:`koe.wire.errors` routes it).
OVER_CAPACITY = "over_capacity"
#: Audio made between two readings of the meter: long enough that the CPU of a segment in progress at
#: either end weighs little (a streamed answer's segments are 2–10 s).
WINDOW_AUDIO_S = 20.0
#: Weight of a window's reading in the meter's figure: a slower machine is believed within a few windows.
WINDOW_WEIGHT = 0.5


class AudioPerCpu:
    """Audio-seconds made per CPU-second of this process, over windows of :data:`WINDOW_AUDIO_S` of audio.

    Told of every segment made (:meth:`made`); the first opens the first window, so that the CPU spent
    before it (loading and warming the model) is charged to nobody.

    Args:
        cpu_s: this process's CPU seconds so far (every thread).
        value: the figure to start from (``None``: none until a window closes).
    """

    def __init__(self, cpu_s: Callable[[], float] = time.process_time, value: float | None = None) -> None:
        self._cpu_s = cpu_s
        self._start_cpu_s: float | None = None
        self._audio_s = 0.0  # made since the window opened
        self.value = value

    def made(self, audio_s: float) -> None:
        """A segment of ``audio_s`` seconds was made; closes the window once it holds enough audio."""
        cpu_s = self._cpu_s()
        if self._start_cpu_s is None:
            self._start_cpu_s = cpu_s
            return
        self._audio_s += audio_s
        spent_s = cpu_s - self._start_cpu_s
        if self._audio_s >= WINDOW_AUDIO_S and spent_s > 0:
            rate = self._audio_s / spent_s
            self.value = rate if self.value is None else self.value + WINDOW_WEIGHT * (rate - self.value)
            self._start_cpu_s, self._audio_s = cpu_s, 0.0


@dataclass(frozen=True, slots=True)
class CapacityStats:
    """What a newcomer would be judged on now: the seats speaking and what the machine gives (``None``
    before the meter holds a figure); refusals so far."""

    speaking: int
    supply: float | None
    refused: int


class Capacity:
    """The account of listeners being spoken to against what the machine makes per second.

    Args:
        cores: the cores the synthesis calls can use at once.
        share: the share of what the machine gives that listeners may need before a newcomer is refused;
            0 never refuses.
        retry_after_s: the retry hint sent with a refusal.
        meter: what prices the machine (default: this process's CPU), told of each segment made for a
            listener (:meth:`made`).
    """

    def __init__(
        self,
        cores: float,
        share: float,
        retry_after_s: Callable[[], float],
        meter: AudioPerCpu | None = None,
    ) -> None:
        if cores <= 0 or not 0 <= share <= 1:
            raise ValueError(f"expected cores > 0 and 0 <= share <= 1, got {cores} and {share}")
        self.cores = cores
        self.share = share
        self._retry_after_s = retry_after_s
        self.meter = meter or AudioPerCpu()
        self.speaking = 0  # seats speaking now
        self.refused = 0

    def made(self, audio_s: float) -> None:
        """A segment of ``audio_s`` seconds was synthesized for a listener (a cache replay was not)."""
        self.meter.made(audio_s)

    def supply(self) -> float | None:
        """Audio-seconds per second the machine gives; ``None`` while the meter holds no figure."""
        per_cpu_s = self.meter.value
        return None if per_cpu_s is None else self.cores * per_cpu_s

    @property
    def stats(self) -> CapacityStats:
        return CapacityStats(self.speaking, self.supply(), self.refused)

    def check(self) -> None:
        """Admit a newcomer to the listeners being spoken to, or refuse it.

        Raises:
            OverloadedError: ``over_capacity``: the listeners with it would need more than ``share`` of
                what the machine gives (counted as refused).
        """
        supply = self.supply()
        if self.share <= 0 or supply is None or not self.speaking:
            return
        need = (self.speaking + 1) * LISTENER_NEED
        if need <= self.share * supply:
            return
        self.refused += 1
        retry = self._retry_after_s()
        raise OverloadedError(
            f"{self.speaking} listeners are being spoken to and the machine makes {supply:.2f} s of audio "
            f"per second: one more would need {need:.2f}, over the {self.share:.0%} it may take; "
            f"retry in {retry:.1f} s",
            code=OVER_CAPACITY,
            retry_after_s=retry,
        )

    def seat(self) -> Seat:
        """A new session's or request's seat."""
        return Seat(self)


class Seat:
    """One session's or request's place in the account: checked the first time it speaks, counted while it
    speaks."""

    def __init__(self, capacity: Capacity) -> None:
        self._capacity = capacity
        self._admitted = False

    @contextmanager
    def speaking(self) -> Iterator[None]:
        """Count this seat as speaking inside the block; the first time, pass :meth:`Capacity.check`.

        Raises:
            OverloadedError: ``over_capacity``, on the first time only.
        """
        capacity = self._capacity
        if not self._admitted:
            capacity.check()
            self._admitted = True
        capacity.speaking += 1
        try:
            yield
        finally:
            capacity.speaking -= 1
