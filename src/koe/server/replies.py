"""What each client dialect hears around a turn's audio (no I/O): one replies object per dialect.

koe's own clients get ``segment``/``words``/``segment_end`` around each segment and ``flushed`` at the end;
the AWS sample's requests ``synthesis_start``/``synthesis_complete``; Deepgram-style clients audio only and
``Flushed``. ``words`` go to koe clients unless they turn them off, to the others only when they ask.
"""

from __future__ import annotations

from koe.pipeline.speaker import SegmentEnded, SegmentStarted
from koe.wire.messages import (
    DeepgramFlushed,
    Dialect,
    Flushed,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SynthesisComplete,
    SynthesisStart,
    Words,
)


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
        return [SegmentEnd(self.turn, event.segment.index, round(event.duration_s, 3))]

    def finished(self, total_s: float, first_audio_ms: float | None, elapsed_s: float) -> ServerMessage:
        """After the turn's last audio."""
        return Flushed(self.turn, round(total_s, 3), first_audio_ms)

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

    def finished(self, total_s: float, first_audio_ms: float | None, elapsed_s: float) -> ServerMessage:
        if self.request_id is None:
            return super().finished(total_s, first_audio_ms, elapsed_s)
        return SynthesisComplete(self.request_id, round(total_s, 3), round(elapsed_s, 3))


class DeepgramReplies(Replies):
    """Deepgram-style clients: audio, then ``Flushed`` with the turn as its ``sequence_id``."""

    words_by_default = False

    def started(self, event: SegmentStarted) -> list[ServerMessage]:
        return self._words(event)

    def ended(self, event: SegmentEnded) -> list[ServerMessage]:
        return []

    def finished(self, total_s: float, first_audio_ms: float | None, elapsed_s: float) -> ServerMessage:
        return DeepgramFlushed(self.turn)


REPLIES: dict[Dialect, type[Replies]] = {
    Dialect.KOE: Replies,
    Dialect.AWS: AwsReplies,
    Dialect.DEEPGRAM: DeepgramReplies,
}
