"""One turn's text → its segments' audio, in order, through the shared scheduler.

Text is cut as late as possible: a segment is cut only when the scheduler has room for it, after the
segmenter has been told how much text fits in the time the listener's queued audio buys (short first
segments, longer ones as audio accumulates). WebSocket turns and HTTP requests both use this.

A job streams its segment from the engine (:func:`koe.engine.streaming.stream`): the segment's timing
comes first and gives its word timings, then the audio. A cancelled job stops between those steps (after
stage A, before the vocoder), though its result is discarded either way.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import partial

import numpy as np

from koe.engine.base import SynthesisRequest
from koe.engine.streaming import stream
from koe.engine.timing import SegmentTiming
from koe.scheduler.deadline import CostTracker, PlaybackClock
from koe.scheduler.queue import Scheduler
from koe.server.words import SpokenWord, written_words
from koe.speech import Speech
from koe.text.segment import Segment, Segmenter
from koe.types import SAMPLE_RATE, Audio, StyleTable

#: The segmenter is fed a word at a time, so each cut sees the hint set just before it.
_WORD = re.compile(r"\S*\s*")
#: The shortest hint given: below this a cut would land mid-phrase ("Sure, I can help with / that.")
#: for too little gain; a first segment still ends at its first clause or sentence when that is shorter.
MIN_HINT_CHARS = 40
#: The buffered text is compacted once this much of it has been fed (keeps appends O(1) amortized).
_COMPACT_AT_CHARS = 4096


@dataclass(frozen=True, slots=True)
class Voice:
    """A resolved voice for one turn: the style table is looked up once, not per segment."""

    spec: str
    style: StyleTable
    lang: str
    speed: float


def resolve_voice(speech: Speech, spec: str, speed: float, lang: str | None) -> Voice:
    """Raises ``VoiceError`` (listing the valid names) for an unknown voice or a malformed blend."""
    return Voice(spec, speech.voices.resolve(spec), lang or speech.voices.lang_of(spec), speed)


@dataclass(frozen=True, slots=True)
class Synthesized:
    """A segment's audio and its words (seconds from the segment's first sample; empty when the engine
    gives no timings)."""

    segment: Segment
    audio: Audio
    took_s: float
    words: tuple[SpokenWord, ...] = ()


@dataclass(frozen=True, slots=True)
class _Result:
    audio: Audio
    words: tuple[SpokenWord, ...]
    took_s: float


def _synthesize(speech: Speech, segment: Segment, voice: Voice, cancel: threading.Event) -> _Result:
    """The worker-thread job: G2P and inference for one segment (blocking); stops early once ``cancel``
    is set (its result is discarded then)."""
    started = time.perf_counter()
    audio: list[Audio] = []
    words: list[SpokenWord] = []
    samples = 0
    for piece in speech.phonemize_words(segment.spoken_text, voice.lang):
        request = SynthesisRequest(piece.phonemes, voice.style, voice.speed)
        for event in stream(speech.engine, request, cancel=cancel):
            if isinstance(event, SegmentTiming):
                words += written_words(segment, event.words(piece.words), samples / SAMPLE_RATE)
            else:
                audio.append(event.audio)
        samples = sum(len(a) for a in audio)
    whole = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
    return _Result(whole, tuple(words), time.perf_counter() - started)


def _stop_if_cancelled(cancel: threading.Event, future: asyncio.Future[_Result]) -> None:
    """However the future is cancelled (``close``, or the awaiting task), a running job stops at its next
    step; the scheduler discards its result anyway."""
    if future.cancelled():
        cancel.set()


@dataclass(slots=True)
class _InFlight:
    segment: Segment
    future: asyncio.Future[_Result]
    estimate_s: float


class SegmentStream:
    """Segments of one turn, synthesized in order; fed with :meth:`add`, ended with :meth:`finish`.

    Args:
        speech: the loaded model.
        scheduler: where jobs run; the first job of the stream goes through admission control.
        cost: how long synthesis takes (for deadlines and segment-length hints); fed with each job.
        voice: the turn's voice.
        clock: the listener's playback clock (shared by a session's turns).
        segmenter: a fresh segmenter for this turn.
        lookahead: segments queued or running at once.
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
    ) -> None:
        self._speech = speech
        self._scheduler = scheduler
        self._cost = cost
        self.voice = voice
        self.clock = clock
        self._segmenter = segmenter
        self._lookahead = lookahead
        self._buffer = ""
        self._fed = 0
        self._cut: deque[Segment] = deque()
        self._in_flight: deque[_InFlight] = deque()
        self._pending_audio_s = 0.0
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
        """The next segment's audio, in order; ``None`` once the finished turn is spoken.

        Raises whatever its job raised (``SynthesisError``...) with that segment skipped, and
        ``OverloadedError`` when admission refuses the turn's first segment. Cancelling is safe: the
        awaited job is dropped or its result discarded; call :meth:`close` for the others.
        """
        while True:
            self._fill()
            if self._in_flight:
                head = self._in_flight[0]
                try:
                    result = await head.future
                finally:
                    if head.future.done():
                        self._in_flight.popleft()
                        self._pending_audio_s -= head.estimate_s
                audio_s = len(result.audio) / SAMPLE_RATE
                self._cost.observe(len(head.segment.spoken_text), audio_s, result.took_s)
                return Synthesized(head.segment, result.audio, result.took_s, result.words)
            if self._flushed and not self._cut:
                return None
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        """Cancel every queued or running job of this turn; idempotent."""
        for item in self._in_flight:
            item.future.cancel()
        self._in_flight.clear()

    def _fill(self) -> None:
        while len(self._in_flight) < self._lookahead:
            segment = self._cut_one()
            if segment is None:
                return
            cost = self._cost.model
            estimate = cost.audio_s(len(segment.spoken_text), self.voice.speed)
            cancel = threading.Event()
            future = self._scheduler.submit(
                partial(_synthesize, self._speech, segment, self.voice, cancel),
                deadline=self.clock.deadline(self._pending_audio_s),
                cost_s=cost.synthesis_s(estimate),
                admit=not self._admitted,
            )
            self._admitted = True
            future.add_done_callback(partial(_stop_if_cancelled, cancel))
            self._in_flight.append(_InFlight(segment, future, estimate))
            self._pending_audio_s += estimate

    def _cut_one(self) -> Segment | None:
        if not self._cut:
            budget_s = self.clock.ahead_s() + self._pending_audio_s
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
