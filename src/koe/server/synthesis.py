"""One turn's text → its segments' audio, in order, through the shared scheduler.

Text is cut as late as possible: a segment is cut only when the scheduler has room for it, after the
segmenter has been told how much text fits in the time the listener's queued audio buys (short first
segments, longer ones as audio accumulates). WebSocket turns and HTTP requests both use this.

A job (:class:`~koe.server.segment_job.SegmentJob`) streams its segment from the engine: the segment's
timing comes first and gives its word timings, then the audio. A cancelled job stops between those steps
(after stage A, before the vocoder), though its result is discarded either way.

With windowed decoding (``Settings.windowed``) a segment is a chain of jobs, each one bounded step of the
engine's stream (docs/engine.md, "Streaming decoder"): the first does G2P, stage A and the leading
silence, each later one a vocoder window, due when the listener would run out of audio (the audio before
it in the listener's queue); the window's size follows that queue too. So windows of every session
interleave by deadline, a long segment never holds a worker for long, and its audio goes out in parts as
they are decoded. Segment lengths are then not limited to what can be synthesized before the listener runs
out: a window, not a segment, is what must finish in time.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial

from koe.errors import OverloadedError
from koe.scheduler.deadline import CostTracker, PlaybackClock
from koe.scheduler.queue import Scheduler
from koe.server.segment_job import SegmentJob, Synthesized, Voice
from koe.speech import Speech
from koe.text.segment import Segment, Segmenter
from koe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)

#: The segmenter is fed a word at a time, so each cut sees the hint set just before it.
_WORD = re.compile(r"\S*\s*")
#: The shortest hint given: below this a cut would land mid-phrase ("Sure, I can help with / that.")
#: for too little gain; a first segment still ends at its first clause or sentence when that is shorter.
MIN_HINT_CHARS = 40
#: The buffered text is compacted once this much of it has been fed (keeps appends O(1) amortized).
_COMPACT_AT_CHARS = 4096


@dataclass(slots=True)
class SegmentProgress:
    """Where one segment's audio stands: its estimated length, its samples produced and handed out."""

    estimate_s: float
    produced: int = 0  # samples in finished parts
    handed: int = 0  # samples handed out to the listener's side

    def undelivered_s(self) -> float:
        """Audio produced and not yet handed out."""
        return (self.produced - self.handed) / SAMPLE_RATE

    def pending_s(self) -> float:
        """Audio still to be handed out: the estimate until a part is (as a whole segment always counted),
        then the estimate less what was, but never less than what waits."""
        if not self.handed:
            return self.estimate_s
        return max(self.estimate_s - self.handed / SAMPLE_RATE, self.undelivered_s())


@dataclass(slots=True)
class _InFlight:
    """A segment on its way: its synthesis, the job running or queued now, parts not yet handed out."""

    work: SegmentJob
    progress: SegmentProgress
    cancel: threading.Event
    job: asyncio.Future[Synthesized] | None = None
    ready: deque[Synthesized] = field(default_factory=deque)
    error: BaseException | None = None


class SegmentStream:
    """Segments of one turn, synthesized in order; fed with :meth:`add`, ended with :meth:`finish`.

    Args:
        speech: the loaded model.
        scheduler: where jobs run; the first job of the stream goes through admission control.
        cost: how long synthesis takes (for deadlines and segment-length hints); fed with each segment.
        voice: the turn's voice.
        clock: the listener's playback clock (shared by a session's turns).
        segmenter: a fresh segmenter for this turn.
        lookahead: segments queued or running at once.
        windowed: each segment a chain of one-window jobs, its audio in parts (where the engine can).
    """

    def __init__(
        self,
        speech: Speech,
        scheduler: Scheduler,
        cost: CostTracker,
        voice: Voice,
        clock: PlaybackClock,
        segmenter: Segmenter,
        *,
        lookahead: int,
        windowed: bool = False,
    ) -> None:
        self._speech = speech
        self._scheduler = scheduler
        self._cost = cost
        self.voice = voice
        self.clock = clock
        self._segmenter = segmenter
        self._lookahead = lookahead
        self._windowed = windowed
        self._buffer = ""
        self._fed = 0
        self._cut: deque[Segment] = deque()
        self._in_flight: deque[_InFlight] = deque()
        self._undelivered = 0  # samples produced and not yet handed out
        self._finishing = False
        self._flushed = False
        self._admitted = False
        self._changed = asyncio.Event()
        #: monotonic time the first segment was cut: where time-to-first-audio starts
        self.first_cut_at: float | None = None

    def add(self, text: str) -> None:
        """More text of the turn (any size, any split)."""
        if self._fed >= _COMPACT_AT_CHARS:
            self._buffer, self._fed = self._buffer[self._fed :], 0
        self._buffer += text
        self._changed.set()

    def finish(self) -> None:
        """The turn's text is complete: what remains will be spoken."""
        self._finishing = True
        self._changed.set()

    def start(self) -> None:
        """Submit what can be submitted now, so that a refusal (``OverloadedError``) is raised here."""
        self._fill()

    async def next(self) -> Synthesized | None:
        """The next part of a segment, in order; ``None`` once the finished turn is spoken.

        Raises whatever a job raised (``SynthesisError``...) with the rest of that segment skipped, and
        ``OverloadedError`` when admission refuses the turn's first segment. Cancelling is safe: jobs keep
        their place; call :meth:`close` to drop them.
        """
        while True:
            self._fill()
            if self._in_flight:
                head = self._in_flight[0]
                if head.ready:
                    return self._hand_out(head, head.ready.popleft())
                if head.error is not None:
                    self._in_flight.popleft()
                    raise head.error
            elif self._flushed and not self._cut:
                return None
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        """Cancel every queued or running job of this turn and drop its unsent parts; idempotent."""
        for item in self._in_flight:
            item.cancel.set()
            if item.job is not None:
                item.job.cancel()
        self._in_flight.clear()
        self._undelivered = 0

    def _hand_out(self, head: _InFlight, part: Synthesized) -> Synthesized:
        head.progress.handed += part.audio.size
        self._undelivered -= part.audio.size
        if part.last:
            self._in_flight.popleft()
            self._cost.observe(len(part.segment.spoken_text), part.end_s, part.took_s)
        return part

    def _buffered_s(self) -> float:
        """The listener's audio in hand or on its way (called from worker threads: reads only)."""
        return self.clock.ahead_s() + self._undelivered / SAMPLE_RATE

    def _pending_s(self, before: _InFlight | None = None) -> float:
        """Audio on its way to the listener ahead of ``before`` (of every segment in flight if ``None``)."""
        total = 0.0
        for item in self._in_flight:
            if item is before:
                break
            total += item.progress.pending_s()
        return total

    def _submit(self, item: _InFlight, *, deadline: float, cost_s: float, admit: bool) -> None:
        job = self._scheduler.submit(item.work.step, deadline=deadline, cost_s=cost_s, admit=admit)
        job.add_done_callback(partial(self._part_done, item))
        item.job = job

    def _part_done(self, item: _InFlight, job: asyncio.Future[Synthesized]) -> None:
        """A job ended (on the loop): keep its part and queue the segment's next step, or keep its error."""
        if job.cancelled():
            return
        error = job.exception()
        if item.cancel.is_set():  # closed while the job's result was on its way
            if error is not None:
                logger.warning("a job of a closed turn failed", exc_info=error)
            return
        if error is None:
            part = job.result()
            item.ready.append(part)
            item.progress.produced += part.audio.size
            self._undelivered += part.audio.size
            if not part.last:
                deadline = self.clock.deadline(self._pending_s(before=item) + item.progress.undelivered_s())
                try:
                    self._submit(item, deadline=deadline, cost_s=item.work.next_cost_s(), admit=False)
                except OverloadedError as exc:  # only when the scheduler is shutting down
                    error = exc
        item.error = error
        self._changed.set()

    def _fill(self) -> None:
        while len(self._in_flight) < self._lookahead:
            segment = self._cut_one()
            if segment is None:
                return
            cost = self._cost.model
            estimate = cost.audio_s(len(segment.spoken_text), self.voice.speed)
            cancel = threading.Event()
            buffered_s = self._buffered_s if self._windowed else None
            job = SegmentJob(self._speech, segment, self.voice, cancel, buffered_s)
            item = _InFlight(job, SegmentProgress(estimate), cancel)
            self._submit(
                item,
                deadline=self.clock.deadline(self._pending_s()),
                cost_s=cost.synthesis_s(estimate),
                admit=not self._admitted,
            )
            self._admitted = True
            self._in_flight.append(item)

    def _cut_one(self) -> Segment | None:
        if not self._cut:
            if not self._windowed:  # windowed, a segment of any length starts as soon as a short one
                budget_s = self.clock.ahead_s() + self._pending_s()
                hint = max(MIN_HINT_CHARS, self._cost.model.chars_within(budget_s, self.voice.speed))
                self._segmenter.set_next_limit(hint)
            while not self._cut and self._fed < len(self._buffer):
                word = _WORD.match(self._buffer, self._fed)
                assert word is not None  # the pattern matches at least one character before the end
                self._fed = word.end()
                self._cut.extend(self._segmenter.feed(word.group()))
            if not self._cut and self._finishing and not self._flushed:
                self._flushed = True
                self._cut.extend(self._segmenter.flush())
        if not self._cut:
            return None
        if self.first_cut_at is None:
            self.first_cut_at = time.monotonic()
        return self._cut.popleft()
