"""What each client dialect hears around a turn's audio (no I/O): one replies object per dialect.

koe's own clients get ``segment``/``words``/``segment_end`` around each segment and ``flushed`` at the end;
the AWS sample's requests ``synthesis_start``/``synthesis_complete``; Deepgram-style clients audio only and
``Flushed``; NIM clients their audio as base64 in ``conversation.item.speech.data`` text frames, and
``conversation.item.speech.completed`` after the text ended by ``input_text.done``. ``words`` go to koe
clients unless they turn them off, to the others only when they ask.
"""

from __future__ import annotations

import base64

from koe.pipeline.speaker import SegmentEnded, SegmentStarted
from koe.pipeline.voice import Voice
from koe.server.protocol import NIM_AUDIO_FORMAT
from koe.wire.fields import STREAM_FORMATS
from koe.wire.messages import (
    ConfigAck,
    DeepgramFlushed,
    Dialect,
    Flushed,
    NimSessionUpdated,
    NimSpeechCompleted,
    NimSpeechData,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SynthesisComplete,
    SynthesisStart,
    TurnOptions,
    Words,
    encode,
)

#: Digits of a second in the durations sent (microseconds): ``duration_s × sample_rate`` then rounds to the
#: segment's exact sample count at every rate koe sends (at 48 kHz a microsecond is 0.048 of a sample).
DURATION_DIGITS = 6


class Replies:
    """koe's own dialect (the base every other dialect narrows)."""

    def __init__(self, turn: int, words: bool | None, request_id: str | int | None = None) -> None:
        self.turn = turn
        self.words = words if words is not None else self.words_by_default
        self.request_id = request_id

    words_by_default = True

    def opened(self) -> list[ServerMessage]:
        """Before the turn's first audio."""
        return []

    def started(self, event: SegmentStarted) -> list[ServerMessage]:
        """Before a segment's first audio."""
        segment = event.segment
        head: list[ServerMessage] = [
            SegmentStart(self.turn, segment.index, segment.text, segment.source_span)
        ]
        return head + self._words(event)

    def ended(self, event: SegmentEnded) -> list[ServerMessage]:
        """After a segment's last audio."""
        return [SegmentEnd(self.turn, event.segment.index, round(event.duration_s, DURATION_DIGITS))]

    def audio(self, frame: bytes) -> str | bytes:
        """One frame of encoded audio as it goes on the wire: a binary frame."""
        return frame

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        """After the turn's last audio; ``last``: the client said no more text follows."""
        return [Flushed(self.turn, round(total_s, DURATION_DIGITS), first_audio_ms)]

    def _words(self, event: SegmentStarted) -> list[ServerMessage]:
        if not (self.words and event.words):
            return []
        return [Words(self.turn, event.segment.index, event.turn_words())]


class AwsReplies(Replies):
    """The AWS sample's request: its id on ``synthesis_start`` and ``synthesis_complete``, audio between."""

    words_by_default = False

    def opened(self) -> list[ServerMessage]:
        return [] if self.request_id is None else [SynthesisStart(self.request_id)]

    def started(self, event: SegmentStarted) -> list[ServerMessage]:
        return self._words(event)

    def ended(self, event: SegmentEnded) -> list[ServerMessage]:
        return []

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        if self.request_id is None:
            return super().finished(total_s, first_audio_ms, elapsed_s)
        return [SynthesisComplete(self.request_id, round(total_s, 3), round(elapsed_s, 3))]


class DeepgramReplies(Replies):
    """Deepgram-style clients: audio, then ``Flushed`` with the turn as its ``sequence_id``."""

    words_by_default = False

    def started(self, event: SegmentStarted) -> list[ServerMessage]:
        return self._words(event)

    def ended(self, event: SegmentEnded) -> list[ServerMessage]:
        return []

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        return [DeepgramFlushed(self.turn)]


class NimReplies(DeepgramReplies):
    """NIM's realtime TTS events: base64 audio in JSON, and the completion only after ``input_text.done``
    (pipecat's NVIDIA service reconnects when it reads it, so a commit must not send it)."""

    def audio(self, frame: bytes) -> str | bytes:
        return encode(NimSpeechData(base64.b64encode(frame).decode("ascii")))

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        return [NimSpeechCompleted()] if last else []


REPLIES: dict[Dialect, type[Replies]] = {
    Dialect.KOE: Replies,
    Dialect.AWS: AwsReplies,
    Dialect.DEEPGRAM: DeepgramReplies,
    Dialect.NIM: NimReplies,
}


def config_reply(dialect: Dialect, session: str, voice: Voice, options: TurnOptions) -> ServerMessage:
    """The answer to a settings change, in the words of the dialect that sent it."""
    if dialect is Dialect.NIM:
        return NimSessionUpdated(
            {
                "id": session,
                "object": "realtime.synthesize_session",
                "input_text_synthesis": {"voice_name": voice.spec, "language_code": _bcp47(voice.lang)},
                "output_audio_params": {
                    "sample_rate_hz": options.sample_rate,
                    "num_channels": 1,
                    "audio_format": NIM_AUDIO_FORMAT,
                },
            }
        )
    return ConfigAck(
        session, voice.spec, voice.speed, options.sample_rate, STREAM_FORMATS[options.format], voice.lang
    )


def _bcp47(lang: str) -> str:
    """``en-us`` as NIM writes it: ``en-US``."""
    language, _, region = lang.partition("-")
    return f"{language}-{region.upper()}" if region else language
