"""One turn of a WebSocket session: its text, settings, speaker and replies, in one object.

A cancel drops the whole object (its task is cancelled, its jobs leave the scheduler, its unsent data
leaves the outbox); nothing is reset field by field. Turns of a session speak one after another: each
turn's task waits for the previous one before it queues audio, but its text is taken in meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

from koe.audio.encoder import StreamEncoder
from koe.audio.formats import AudioFormat
from koe.errors import KoeError, OverloadedError
from koe.pipeline.speaker import SegmentAudio, SegmentEnded, SegmentFailed, SegmentStarted, Speaker
from koe.scheduler.capacity import Seat
from koe.server.dialects import SPECS
from koe.server.outbox import Outbox
from koe.wire.messages import Dialect, ServerMessage, TurnOptions, encode

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
        opened_by: the dialect of the message that opened it (it says what goes around each segment).
        options: the settings in force for the whole turn.
        speaker: its segments' synthesis, read as events.
        report: the session's error handler (decides whether the session survives the error).
        seat: the session's place in the capacity account: counted while the turn speaks, checked if it
            is the session's first turn to speak.
    """

    def __init__(
        self,
        number: int,
        opened_by: Dialect,
        options: TurnOptions,
        speaker: Speaker,
        *,
        outbox: Outbox,
        frame_s: float,
        report: Callable[[KoeError], object],
        seat: Seat,
        request_id: str | int | None = None,
    ) -> None:
        self.number = number
        self.opened_by = opened_by
        self.options = options
        self.speaker = speaker
        self.request_id = request_id
        self.chars = 0
        self.ended_by: Dialect | None = None
        self.last = False  # the client said no more text follows (NIM's input_text.done)
        self.task: asyncio.Task[None] | None = None
        self._outbox = outbox
        self._frame_s = frame_s
        self._report = report
        self._seat = seat
        self._opened_at = time.monotonic()
        self._replies = SPECS[opened_by].replies(number, options.words, request_id)

    @property
    def tally_fields(self) -> dict[str, object]:
        """The turn's log fields (counts and times, never text)."""
        return self.speaker.tally.fields(self.speaker.started_at)

    def add(self, text: str) -> None:
        self.chars += len(text)
        self.speaker.stream.add(text)

    def finish(self, dialect: Dialect, *, last: bool = False) -> None:
        """The client flushed: speak the rest, then reply in ``dialect``'s words (``last``: it sends no
        more text, see :class:`~koe.wire.messages.Flush`)."""
        self.ended_by = dialect
        self.last = last
        self.speaker.stream.finish()

    def cancelled(self) -> None:
        """The client barged in (the session cancels the task)."""
        self.speaker.tally.outcome = "cancelled"

    async def run(self, after: asyncio.Task[None] | None) -> None:
        """Speak the turn once the turn ``after`` has spoken. Cancelling drops everything unsent."""
        try:
            if after is not None:
                await asyncio.wait([after])
            with self._seat.speaking():
                await self._speak()
        except OverloadedError as exc:
            self.speaker.tally.outcome = "refused"
            self._report(exc)
        finally:
            self.speaker.stream.close()

    async def _speak(self) -> None:
        """Each segment's audio goes out between its start and its end: the encoder is cut at each end, so
        its resampler holds nothing back, and the end says how long the segment is at the client's rate."""
        fmt, rate = self.options.format, self.options.sample_rate
        encoder = StreamEncoder(fmt, rate)
        ended_at = 0  # the samples sent up to the last segment's end
        self._send(*self._replies.opened())
        async for event in self.speaker.events():
            match event:
                case SegmentStarted():
                    self._send(*self._replies.started(event))
                case SegmentAudio(audio=audio):
                    self._audio(encoder.encode(audio))
                    await self._outbox.room()
                case SegmentEnded():
                    self._audio(encoder.cut())
                    sent = dataclasses.replace(event, duration_s=(encoder.samples - ended_at) / rate)
                    ended_at = encoder.samples
                    self._send(*self._replies.ended(sent))
                case SegmentFailed(error=error):
                    self._report(error)
        self._audio(encoder.finish())
        closing = SPECS[self.ended_by or self.opened_by].replies(
            self.number, self.options.words, self.request_id
        )
        elapsed_s = time.monotonic() - self._opened_at
        total_s = encoder.samples / rate
        self._send(*closing.finished(total_s, self.speaker.first_audio_ms(), elapsed_s, last=self.last))
        self.speaker.tally.outcome = "flushed"

    def _send(self, *messages: ServerMessage) -> None:
        for message in messages:
            self._outbox.data(self.number, encode(message))

    def _audio(self, payload: bytes) -> None:
        fmt, rate = self.options.format, self.options.sample_rate
        seconds_per_byte = 1 / (_BYTES_PER_SAMPLE[fmt] * rate)
        for frame in split_frames(payload, fmt, rate, self._frame_s):
            self._outbox.data(self.number, self._replies.audio(frame), len(frame) * seconds_per_byte)
