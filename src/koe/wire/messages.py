"""koe's streaming protocol, both ways, as typed messages: what the server parses and the clients send,
what the server encodes and the clients decode. No I/O here; parsing is the server's
(:mod:`koe.server.protocol`), encoding requests the client's (:mod:`koe.client.messages`).

Four dialects share one session: koe's own messages (``append``/``flush``/``cancel``/...), the AWS
sample's untyped ``{"text": ...}`` request, Deepgram-style ``Speak``/``Flush``/``Clear``/``Close``, and
NVIDIA NIM's realtime TTS events (``synthesize_session.update``, ``input_text.append``/``commit``/``done``),
the protocol of pipecat's NVIDIA SageMaker TTS service. See docs/protocol.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar

from koe.audio.formats import AudioFormat
from koe.pipeline.words import SpokenWord


class Dialect(StrEnum):
    """Which client family sent a message, so replies come back in its own vocabulary."""

    KOE = "koe"
    AWS = "aws"
    DEEPGRAM = "deepgram"
    NIM = "nim"


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """The settings in force for a turn (or a session's next turns): every field decided."""

    voice: str
    speed: float
    sample_rate: int
    format: AudioFormat
    lang: str | None = None  # None: the voice's own
    words: bool | None = None  # ``words`` messages; None: for koe turns only (docs/protocol.md)


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """Settings a client sends: only what it names (``None`` keeps the value in force)."""

    voice: str | None = None
    speed: float | None = None
    sample_rate: int | None = None
    format: AudioFormat | None = None
    lang: str | None = None
    words: bool | None = None

    def over(self, base: TurnOptions) -> TurnOptions:
        """These options where set, ``base``'s elsewhere."""
        return TurnOptions(
            **{
                f.name: getattr(base, f.name) if getattr(self, f.name) is None else getattr(self, f.name)
                for f in fields(TurnOptions)
            }
        )


# --- client → server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Configure:
    options: SessionOptions
    dialect: Dialect = Dialect.KOE


@dataclass(frozen=True, slots=True)
class Append:
    text: str
    dialect: Dialect


@dataclass(frozen=True, slots=True)
class Flush:
    """The turn's text is complete; ``last``: no more text follows (NIM's ``input_text.done``), so the
    reply after the audio says the whole synthesis is complete."""

    dialect: Dialect
    last: bool = False


@dataclass(frozen=True, slots=True)
class Cancel:
    dialect: Dialect


@dataclass(frozen=True, slots=True)
class Close:
    dialect: Dialect


@dataclass(frozen=True, slots=True)
class Request:
    """The AWS sample's whole-text request: one turn with its own overrides, replied to with its id."""

    text: str
    options: SessionOptions
    request_id: str | int | None


ClientMessage = Configure | Append | Flush | Cancel | Close | Request


# --- server → client ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigAck:
    TYPE: ClassVar[str] = "config"
    session: str
    voice: str
    speed: float
    sample_rate: int
    format: str
    lang: str


@dataclass(frozen=True, slots=True)
class SegmentStart:
    TYPE: ClassVar[str] = "segment"
    turn: int
    index: int
    text: str
    source_span: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Words:
    """When each word of a segment is heard: sent right before the segment's first audio frame.

    Times are seconds from the turn's first sample; ``source_span`` is into the turn's text as sent.
    """

    TYPE: ClassVar[str] = "words"
    turn: int
    index: int
    words: tuple[SpokenWord, ...]


@dataclass(frozen=True, slots=True)
class SegmentEnd:
    TYPE: ClassVar[str] = "segment_end"
    turn: int
    index: int
    duration_s: float


@dataclass(frozen=True, slots=True)
class Flushed:
    TYPE: ClassVar[str] = "flushed"
    turn: int
    audio_s: float
    ttfa_ms: float | None  # None when the turn had nothing to say


@dataclass(frozen=True, slots=True)
class Cancelled:
    TYPE: ClassVar[str] = "cancelled"
    turn: int


@dataclass(frozen=True, slots=True)
class Error:
    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    retry_after_s: float | None = None  # only for overload


@dataclass(frozen=True, slots=True)
class SynthesisStart:
    TYPE: ClassVar[str] = "synthesis_start"
    request_id: str | int


@dataclass(frozen=True, slots=True)
class SynthesisComplete:
    """The AWS sample's completion; each figure is also sent under the name the sample's test client
    reads (``duration_seconds``, ``elapsed_seconds``)."""

    TYPE: ClassVar[str] = "synthesis_complete"
    ALIASES: ClassVar[dict[str, str]] = {
        "duration_seconds": "total_duration_s",
        "elapsed_seconds": "elapsed_s",
    }
    request_id: str | int
    total_duration_s: float
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class DeepgramFlushed:
    TYPE: ClassVar[str] = "Flushed"
    sequence_id: int


@dataclass(frozen=True, slots=True)
class DeepgramCleared:
    TYPE: ClassVar[str] = "Cleared"
    sequence_id: int


@dataclass(frozen=True, slots=True)
class NimSessionUpdated:
    """The settings in force, in NIM's ``synthesize_session`` shape (the reply to an update)."""

    TYPE: ClassVar[str] = "synthesize_session.updated"
    session: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NimCommitted:
    """At once on ``input_text.commit`` and ``input_text.done``: the text so far is taken."""

    TYPE: ClassVar[str] = "input_text.committed"


@dataclass(frozen=True, slots=True)
class NimSpeechData:
    """One frame of audio for NIM clients: base64 PCM16 in a JSON text frame."""

    TYPE: ClassVar[str] = "conversation.item.speech.data"
    audio: str


@dataclass(frozen=True, slots=True)
class NimSpeechCompleted:
    """After the last audio of the text ended by ``input_text.done``."""

    TYPE: ClassVar[str] = "conversation.item.speech.completed"


ServerMessage = (
    ConfigAck
    | SegmentStart
    | Words
    | SegmentEnd
    | Flushed
    | Cancelled
    | Error
    | SynthesisStart
    | SynthesisComplete
    | DeepgramFlushed
    | DeepgramCleared
    | NimSessionUpdated
    | NimCommitted
    | NimSpeechData
    | NimSpeechCompleted
)
_OMIT_IF_NONE = frozenset({"retry_after_s"})


def encode(message: ServerMessage) -> str:
    """One server message as the JSON text sent in a text frame."""
    body: dict[str, Any] = {"type": message.TYPE}
    for f in fields(message):
        value = getattr(message, f.name)
        if value is None and f.name in _OMIT_IF_NONE:
            continue
        body[f.name] = _json(value)
    for alias, name in getattr(message, "ALIASES", {}).items():
        body[alias] = body[name]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _json(value: Any) -> Any:
    if isinstance(value, SpokenWord):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    return value
