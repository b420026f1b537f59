"""The one loop that turns a turn's segment stream into what its transport sends, as events.

Every transport — a WebSocket turn in any dialect, an HTTP response, an agent turn — reads the same
:class:`Speaker`: it takes each part from the stream, skips a failed segment (saying so), records the
metrics, the turn's tally and its time to first audio, and times the words from the turn's first sample.
The transport maps the events to its own messages; it waits (backpressure) simply by not asking for the
next event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from koe.errors import KoeError, OverloadedError
from koe.pipeline.stream import SegmentStream
from koe.pipeline.tally import Tally
from koe.text.segment import Segment
from koe.types import SAMPLE_RATE, Audio
from koe.wire.words import SpokenWord


class Observer(Protocol):
    """Where the speaker reports what it measured (the server's Prometheus metrics)."""

    def synthesized(self, took_s: float, audio_s: float) -> None:
        """One segment was synthesized: its wall time and its audio."""
        ...

    def first_audio(self, transport: str, latency_s: float) -> None:
        """A turn's first audio went out ``latency_s`` after its first segment was cut (or its request
        arrived)."""
        ...


@dataclass(frozen=True, slots=True)
class SegmentStarted:
    """A segment's first audio follows. ``words`` are timed from the segment's first sample, which is
    ``start_s`` into the turn's audio."""

    segment: Segment
    words: tuple[SpokenWord, ...]
    start_s: float

    def turn_words(self) -> tuple[SpokenWord, ...]:
        """The words timed from the turn's first sample."""
        return tuple(word.shifted(self.start_s) for word in self.words)


@dataclass(frozen=True, slots=True)
class SegmentAudio:
    """A piece of a segment's audio, in order; ``last``: it is the segment's last part (a segment decoded
    whole is one piece, first and last)."""

    segment: Segment
    audio: Audio
    last: bool = True


@dataclass(frozen=True, slots=True)
class SegmentEnded:
    """The segment's audio is complete (``duration_s`` of it; less than planned if it failed midway)."""

    segment: Segment
    duration_s: float


@dataclass(frozen=True, slots=True)
class SegmentFailed:
    """A segment could not be synthesized and is skipped; the turn goes on."""

    error: KoeError


SpeechEvent = SegmentStarted | SegmentAudio | SegmentEnded | SegmentFailed


class Speaker:
    """Reads one turn's :class:`SegmentStream` for its transport.

    Args:
        stream: the turn's segments.
        observer: the metrics.
        transport: the label its time to first audio is recorded under (``ws``, ``http``, ``agent``).
        started_at: where time to first audio starts (monotonic); default: when the first segment is cut.
    """

    def __init__(
        self, stream: SegmentStream, observer: Observer, transport: str, *, started_at: float | None = None
    ) -> None:
        self.stream = stream
        self.tally = Tally()
        self.total_s = 0.0  # the turn's audio in the segments ended so far
        self._observer = observer
        self._transport = transport
        self._started_at = started_at

    @property
    def started_at(self) -> float | None:
        return self._started_at if self._started_at is not None else self.stream.first_cut_at

    def first_audio_ms(self) -> float | None:
        """Time to first audio, once there was some."""
        started, first = self.started_at, self.tally.first_audio_at
        return None if started is None or first is None else round((first - started) * 1000, 1)

    async def events(self) -> AsyncIterator[SpeechEvent]:
        """The turn's events until its finished text is spoken. ``OverloadedError`` (the turn refused, or
        the server shutting down) ends it; cancelling is safe (close the stream to drop its jobs)."""
        sent_s = 0.0  # the current segment's audio so far (it may come in parts)
        segment: Segment | None = None
        while True:
            try:
                part = await self.stream.next()
            except OverloadedError:
                raise
            except KoeError as exc:  # one segment failed (bad G2P input...): say so, speak the rest
                if sent_s and segment is not None:  # some of its audio went out: it ends there
                    yield SegmentEnded(segment, sent_s)
                    self.total_s += sent_s
                sent_s = 0.0
                yield SegmentFailed(exc)
                continue
            if part is None:
                return
            if part.last:
                if not part.cached:  # a replay is counted by the cache's own metrics
                    self._observer.synthesized(part.took_s, part.end_s)
                self.tally.add(part.took_s, part.end_s)
            if part.audio.size:
                segment = part.segment
                if part.first:
                    yield SegmentStarted(segment, part.words, self.total_s)
                self._first_audio()
                yield SegmentAudio(segment, part.audio, part.last)
                sent_s += part.audio.size / SAMPLE_RATE
            if part.last and sent_s:  # a segment with nothing speakable sends nothing at all
                yield SegmentEnded(part.segment, part.end_s)
                self.total_s += part.end_s
                sent_s = 0.0

    def _first_audio(self) -> None:
        if self.tally.first_audio_at is not None:
            return
        self.tally.audio_sent()
        started = self.started_at
        if started is not None and self.tally.first_audio_at is not None:
            self._observer.first_audio(self._transport, self.tally.first_audio_at - started)
