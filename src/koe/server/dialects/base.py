"""What a dialect module declares (:class:`DialectSpec`), the settings fields every dialect reads, and the
replies every dialect narrows (:class:`Replies`, koe's own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koe.pipeline.speaker import SegmentEnded, SegmentStarted
from koe.wire.fields import (
    bool_field,
    lang_field,
    lexicon_field,
    sample_rate_field,
    speed_field,
    stream_format_field,
    text_field,
    voice_field,
)
from koe.wire.messages import (
    Append,
    ClientMessage,
    Dialect,
    Flushed,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SessionOptions,
    TurnOptions,
    Words,
)

if TYPE_CHECKING:
    from koe.pipeline.voice import Voice

#: Reads one message of a known ``type`` from its JSON object; the int is the most text it may carry.
MessageParser = Callable[[Mapping[str, Any], int], ClientMessage]


@dataclass(frozen=True, slots=True)
class DialectSpec:
    """One client dialect, as a WebSocket session serves it.

    Attributes:
        dialect: its name, carried by the messages it sends and the turns they open.
        messages: its message types (the JSON ``type``) and how each is read.
        replies: what its clients hear around a turn's audio.
        config_reply: the answer to a settings change (session id, the voice, the settings in force).
        cancelled: the answer to a cancel, by the number of the last turn cancelled.
        untyped: how a message without ``type`` is read, for the one dialect that sends such.
        flush_ack: sent at once on a flush, ahead of the audio still queued.
        pcm_only: its audio is PCM16 whatever the session's format.
        opens_turns: a turn it starts stays open for more text until it is flushed.
    """

    dialect: Dialect
    messages: Mapping[str, MessageParser]
    replies: type[Replies]
    config_reply: Callable[[str, Voice, TurnOptions], ServerMessage]
    cancelled: Callable[[int], ServerMessage]
    untyped: MessageParser | None = None
    flush_ack: ServerMessage | None = None
    pcm_only: bool = False
    opens_turns: bool = True


def constant(message: ClientMessage) -> MessageParser:
    """A parser for a message type without fields: every such message is ``message``."""
    return lambda obj, max_chars: message


def appended(dialect: Dialect) -> MessageParser:
    """A parser for ``dialect``'s message of more text (its ``text`` field)."""
    return lambda obj, max_chars: Append(text_field(obj, max_chars), dialect)


def options(obj: Mapping[str, Any]) -> SessionOptions:
    """Validate the settings fields present in ``obj``; each error names its field."""
    return SessionOptions(
        voice=None if obj.get("voice") is None else voice_field(obj["voice"]),
        speed=None if obj.get("speed") is None else speed_field(obj["speed"]),
        sample_rate=None if obj.get("sample_rate") is None else sample_rate_field(obj["sample_rate"]),
        format=None if obj.get("format") is None else stream_format_field(obj["format"]),
        lang=None if obj.get("lang") is None else lang_field(obj["lang"]),
        words=None if obj.get("words") is None else bool_field("words", obj["words"]),
        lexicon=None if obj.get("lexicon") is None else lexicon_field(obj["lexicon"]),
    )


#: Digits of a second in the durations sent (microseconds): ``duration_s × sample_rate`` then rounds to the
#: segment's exact sample count at every rate koe sends (at 48 kHz a microsecond is 0.048 of a sample).
DURATION_DIGITS = 6


class Replies:
    """What koe's own clients hear around a turn's audio (the base every other dialect narrows)."""

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


class Unframed(Replies):
    """Replies of dialects whose audio has no segment framing around it: a segment's words (only when the
    client asks for them) before its audio, nothing at its end."""

    words_by_default = False

    def started(self, event: SegmentStarted) -> list[ServerMessage]:
        return self._words(event)

    def ended(self, event: SegmentEnded) -> list[ServerMessage]:
        return []
