"""One turn of a WebSocket session: its text, settings, synthesis and replies, in one object.

A cancel drops the whole object (its task is cancelled, its jobs leave the scheduler, its unsent data
leaves the outbox); nothing is reset field by field. Turns of a session speak one after another: each
turn's task waits for the previous one before it queues audio, but its text is taken in meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from koe.audio.encoder import StreamEncoder
from koe.audio.formats import AudioFormat
from koe.errors import KoeError, OverloadedError
from koe.scheduler.deadline import PlaybackClock
from koe.server.metrics import Metrics
from koe.server.outbox import Outbox
from koe.server.protocol import (
    DeepgramFlushed,
    Dialect,
    Flushed,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SessionOptions,
    SynthesisComplete,
    SynthesisStart,
    Words,
    encode,
)
from koe.server.segment_job import Synthesized
from koe.server.synthesis import SegmentStream
from koe.server.tally import Tally
from koe.text.segment import Segment
from koe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)

_BYTES_PER_SAMPLE = {AudioFormat.PCM: 2, AudioFormat.MULAW: 1, AudioFormat.ALAW: 1}


def split_frames(payload: bytes, fmt: AudioFormat, sample_rate: int, frame_s: float) -> list[bytes]:
    """Cut encoded audio into frames of at most ``frame_s`` seconds, on sample boundaries."""
    width = _BYTES_PER_SAMPLE[fmt]
    step = max(1, int(sample_rate * frame_s)) * width
    return [payload[i : i + step] for i in range(0, len(payload), step)]


class Turn:
    """A turn: opened by its first text, ended by a flush (or a request), dropped by a cancel.

    Args:
        number: the turn's number in its session (Deepgram-style replies call it ``sequence_id``).
        opened_by: the dialect of the message that opened it: koe turns get ``segment`` messages, AWS
            requests ``synthesis_start``/``synthesis_complete``, Deepgram turns audio only.
        options: the effective settings, fixed for the whole turn.
        stream: its segments' synthesis.
        report: the session's error handler (decides whether the session survives the error).
    """

    def __init__(
        self,
        number: int,
        opened_by: Dialect,
        options: SessionOptions,
        stream: SegmentStream,
        *,
        outbox: Outbox,
        clock: PlaybackClock,
        metrics: Metrics,
        frame_s: float,
        report: Callable[[KoeError], object],
        request_id: str | int | None = None,
    ) -> None:
        self.number = number
        self.opened_by = opened_by
        self.options = options
        self.stream = stream
        self.request_id = request_id
        self.chars = 0
        self.ended_by: Dialect | None = None
        self.task: asyncio.Task[None] | None = None
        self.tally = Tally()  # for the turn's log line
        self._outbox = outbox
        self._clock = clock
        self._metrics = metrics
        self._frame_s = frame_s
        self._report = report
        self._opened_at = time.monotonic()
        self._segment: Segment | None = None  # the segment being sent (or last sent)
        #: koe clients get ``words`` unless they turned them off; other dialects only when they ask
        self.sends_words = options.words if options.words is not None else opened_by is Dialect.KOE

    @property
    def fmt(self) -> AudioFormat:
        assert self.options.format is not None  # effective options are complete
        return self.options.format

    @property
    def sample_rate(self) -> int:
        assert self.options.sample_rate is not None  # effective options are complete
        return self.options.sample_rate

    def add(self, text: str) -> None:
        self.chars += len(text)
        self.stream.add(text)

    def finish(self, dialect: Dialect) -> None:
        """The client flushed: speak the rest, then reply in ``dialect``'s words."""
        self.ended_by = dialect
        self.stream.finish()

    async def run(self, after: asyncio.Task[None] | None) -> None:
        """Speak the turn once the turn ``after`` has spoken. Cancelling drops everything unsent."""
        try:
            if after is not None:
                await asyncio.wait([after])
            await self._speak()
        except OverloadedError as exc:
            self.tally.outcome = "refused"
            self._report(exc)
        finally:
            self.stream.close()

    async def _speak(self) -> None:
        encoder = StreamEncoder(self.fmt, self.sample_rate)
        if self.opened_by is Dialect.AWS and self.request_id is not None:
            self._send(SynthesisStart(self.request_id))
        total_s = 0.0  # the turn's audio before the current segment
        sent_s = 0.0  # the current segment's audio sent so far (it may come in parts)
        first_audio_at: float | None = None
        while True:
            try:
                item = await self.stream.next()
            except OverloadedError:
                raise
            except KoeError as exc:  # one segment failed (bad G2P input...): say so, speak the rest
                if sent_s:  # it failed after some of its audio went out: it ends there
                    self._end_segment(sent_s)
                    total_s, sent_s = total_s + sent_s, 0.0
                self._report(exc)
                continue
            if item is None:
                break
            if item.last:
                self._metrics.observe_synthesis(item.took_s, item.end_s)
                self.tally.add(item.took_s, item.end_s)
            duration = len(item.audio) / SAMPLE_RATE
            if duration:
                if item.first:
                    self._start_segment(item, total_s)
                self._audio(encoder.encode(item.audio))
                self._clock.delivered(duration)
                sent_s += duration
                if first_audio_at is None:
                    first_audio_at = time.monotonic()
                    self.tally.audio_sent()
                    if self.stream.first_cut_at is not None:
                        self._metrics.time_to_first_audio.labels("ws").observe(
                            first_audio_at - self.stream.first_cut_at
                        )
            if item.last and sent_s:  # a segment with nothing speakable sends nothing at all
                self._end_segment(item.end_s)
                total_s, sent_s = total_s + item.end_s, 0.0
            if duration:
                await self._outbox.room()
        self._audio(encoder.finish())
        self._send(self._end_message(total_s, first_audio_at))
        self._metrics.turns.labels("flushed").inc()
        self.tally.outcome = "flushed"

    def _start_segment(self, part: Synthesized, offset_s: float) -> None:
        """What goes before a segment's audio; its words are shifted to the turn's first sample."""
        segment = self._segment = part.segment
        if self.opened_by is Dialect.KOE:
            self._send(SegmentStart(self.number, segment.index, segment.text, segment.source_span))
        if self.sends_words and part.words:
            self._send(Words(self.number, segment.index, tuple(w.shifted(offset_s) for w in part.words)))

    def _end_segment(self, duration_s: float) -> None:
        if self.opened_by is Dialect.KOE and self._segment is not None:
            self._send(SegmentEnd(self.number, self._segment.index, round(duration_s, 3)))

    def _end_message(self, total_s: float, first_audio_at: float | None) -> ServerMessage:
        if self.opened_by is Dialect.AWS and self.request_id is not None:
            return SynthesisComplete(
                self.request_id, round(total_s, 3), round(time.monotonic() - self._opened_at, 3)
            )
        if self.ended_by is Dialect.DEEPGRAM:
            return DeepgramFlushed(self.number)
        ttfa_ms = None
        if first_audio_at is not None and self.stream.first_cut_at is not None:
            ttfa_ms = round((first_audio_at - self.stream.first_cut_at) * 1000, 1)
        return Flushed(self.number, round(total_s, 3), ttfa_ms)

    def _send(self, message: ServerMessage) -> None:
        self._outbox.data(self.number, encode(message))

    def _audio(self, payload: bytes) -> None:
        seconds_per_byte = 1 / (_BYTES_PER_SAMPLE[self.fmt] * self.sample_rate)
        for frame in split_frames(payload, self.fmt, self.sample_rate, self._frame_s):
            self._outbox.data(self.number, frame, len(frame) * seconds_per_byte)
