"""koe's streaming protocol, both ways, as typed messages: one schema per message. The server encodes its
replies with them and koe's clients decode them (:func:`encode`, :func:`decode`); clients encode requests
(:func:`encode_request`) and the server reads koe's plain ones by their schema (:func:`decode_frame`), the
rest — settings, other dialects — with its validating parser (:mod:`koe.server.protocol`). No I/O here.

Four dialects share one session: koe's own messages (``append``/``flush``/``cancel``/...), the AWS
sample's untyped ``{"text": ...}`` request, Deepgram-style ``Speak``/``Flush``/``Clear``/``Close``, and
NVIDIA NIM's realtime TTS events (``synthesize_session.update``, ``input_text.append``/``commit``/``done``),
the protocol of pipecat's NVIDIA SageMaker TTS service. See docs/protocol.md.

The schemas are msgspec structs (chosen over pydantic for the cost of reading an ``append``, the hot path):
a message's ``type`` is its struct's tag, so encoding and decoding are msgspec's, not code of koe's.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

import msgspec

from koe.audio.formats import AudioFormat
from koe.errors import ProtocolError
from koe.wire.words import SpokenWord


class Dialect(StrEnum):
    """Which client family sent a message, so replies come back in its own vocabulary."""

    KOE = "koe"
    AWS = "aws"
    DEEPGRAM = "deepgram"
    NIM = "nim"


class TurnOptions(msgspec.Struct, frozen=True):
    """The settings in force for a turn (or a session's next turns): every field decided."""

    voice: str
    speed: float
    sample_rate: int
    format: AudioFormat
    lang: str | None = None  # None: the voice's own
    words: bool | None = None  # ``words`` messages; None: for koe turns only (docs/protocol.md)
    lexicon: dict[str, dict[str, str]] | None = None  # the caller's (docs/pronunciation.md)


class SessionOptions(msgspec.Struct, frozen=True, omit_defaults=True):
    """Settings a client sends: only what it names (``None`` keeps the value in force)."""

    voice: str | None = None
    speed: float | None = None
    sample_rate: int | None = None
    format: AudioFormat | None = None
    lang: str | None = None
    words: bool | None = None
    lexicon: dict[str, dict[str, str]] | None = None

    def over(self, base: TurnOptions) -> TurnOptions:
        """These options where set, ``base``'s elsewhere."""
        return TurnOptions(
            **{
                name: getattr(base, name) if getattr(self, name) is None else getattr(self, name)
                for name in TurnOptions.__struct_fields__
            }
        )


# --- client → server ---------------------------------------------------------------------------------


class Configure(msgspec.Struct, frozen=True):
    options: SessionOptions
    dialect: Dialect = Dialect.KOE


class Append(msgspec.Struct, frozen=True):
    text: str
    dialect: Dialect


class Flush(msgspec.Struct, frozen=True):
    """The turn's text is complete; ``last``: no more text follows (NIM's ``input_text.done``), so the
    reply after the audio says the whole synthesis is complete."""

    dialect: Dialect
    last: bool = False


class Cancel(msgspec.Struct, frozen=True):
    dialect: Dialect


class Close(msgspec.Struct, frozen=True):
    dialect: Dialect


class Request(msgspec.Struct, frozen=True):
    """The AWS sample's whole-text request: one turn with its own overrides, replied to with its id."""

    text: str
    options: SessionOptions
    request_id: str | int | None


ClientMessage = Configure | Append | Flush | Cancel | Close | Request


# --- server → client ---------------------------------------------------------------------------------


class Reply(msgspec.Struct, frozen=True, tag_field="type"):
    """A message the server sends: its ``type`` on the wire is its struct's tag."""


class ConfigAck(Reply, frozen=True, tag="config"):
    session: str
    voice: str
    speed: float
    sample_rate: int
    format: str
    lang: str


class SegmentStart(Reply, frozen=True, tag="segment"):
    turn: int
    index: int
    text: str
    source_span: tuple[int, int]


class Words(Reply, frozen=True, tag="words"):
    """When each word of a segment is heard: sent right before the segment's first audio frame.

    Times are seconds from the turn's first sample; ``source_span`` is into the turn's text as sent.
    """

    turn: int
    index: int
    words: tuple[SpokenWord, ...]


class SegmentEnd(Reply, frozen=True, tag="segment_end"):
    turn: int
    index: int
    duration_s: float


class Flushed(Reply, frozen=True, tag="flushed"):
    turn: int
    audio_s: float
    ttfa_ms: float | None  # None when the turn had nothing to say


class Cancelled(Reply, frozen=True, tag="cancelled"):
    turn: int


class Error(Reply, frozen=True, tag="error", omit_defaults=True):
    code: str
    message: str
    retry_after_s: float | None = None  # only for overload


class SynthesisStart(Reply, frozen=True, tag="synthesis_start"):
    request_id: str | int


class SynthesisComplete(Reply, frozen=True, tag="synthesis_complete"):
    """The AWS sample's completion; each figure is also sent under the name the sample's test client
    reads (``duration_seconds``, ``elapsed_seconds``)."""

    ALIASES: ClassVar[dict[str, str]] = {
        "duration_seconds": "total_duration_s",
        "elapsed_seconds": "elapsed_s",
    }
    request_id: str | int
    total_duration_s: float
    elapsed_s: float


class DeepgramFlushed(Reply, frozen=True, tag="Flushed"):
    sequence_id: int


class DeepgramCleared(Reply, frozen=True, tag="Cleared"):
    sequence_id: int


class NimSessionUpdated(Reply, frozen=True, tag="synthesize_session.updated"):
    """The settings in force, in NIM's ``synthesize_session`` shape (the reply to an update)."""

    session: dict[str, Any]


class NimCommitted(Reply, frozen=True, tag="input_text.committed"):
    """At once on ``input_text.commit`` and ``input_text.done``: the text so far is taken."""


class NimSpeechData(Reply, frozen=True, tag="conversation.item.speech.data"):
    """One frame of audio for NIM clients: base64 PCM16 in a JSON text frame."""

    audio: str


class NimSpeechCompleted(Reply, frozen=True, tag="conversation.item.speech.completed"):
    """After the last audio of the text ended by ``input_text.done``."""


#: The koe dialect's replies a client of ``append``/``flush``/``cancel`` or of a whole-text request receives.
KoeReply = (
    ConfigAck
    | SegmentStart
    | Words
    | SegmentEnd
    | Flushed
    | Cancelled
    | Error
    | SynthesisStart
    | SynthesisComplete
)
ServerMessage = (
    KoeReply
    | DeepgramFlushed
    | DeepgramCleared
    | NimSessionUpdated
    | NimCommitted
    | NimSpeechData
    | NimSpeechCompleted
)
_REPLIES: msgspec.json.Decoder[KoeReply] = msgspec.json.Decoder(KoeReply)
_ENCODER = msgspec.json.Encoder()


def encode(message: ServerMessage) -> str:
    """One server message as the JSON text sent in a text frame."""
    if isinstance(message, SynthesisComplete):
        body = msgspec.to_builtins(message)
        body.update({alias: body[name] for alias, name in SynthesisComplete.ALIASES.items()})
        return _ENCODER.encode(body).decode()
    return _ENCODER.encode(message).decode()


def decode(text: str | bytes) -> KoeReply:
    """One text frame from a koe server as its message (fields a message does not define are ignored, so
    ``synthesis_complete``'s second names are dropped).

    Raises:
        ProtocolError: not JSON, an unknown ``type``, or fields that do not match it.
    """
    try:
        return _REPLIES.decode(text)
    except msgspec.DecodeError as exc:  # ValidationError included
        # msgspec names the field and the types, never the value: a reply can quote the client's text
        raise ProtocolError(f"unexpected message from the TTS server: {exc}") from exc


# --- koe's requests as they cross the wire ---------------------------------------------------------------


class Frame(msgspec.Struct, frozen=True, tag_field="type", forbid_unknown_fields=True):
    """A koe request with nothing to validate but its shape: its ``type`` is the struct's tag, and a field
    it does not define makes it no ``Frame`` (the server's validating parser then reads it)."""


class AppendFrame(Frame, frozen=True, tag="append"):
    text: str


class FlushFrame(Frame, frozen=True, tag="flush"):
    pass


class CancelFrame(Frame, frozen=True, tag="cancel"):
    pass


class CloseFrame(Frame, frozen=True, tag="close"):
    pass


KoeFrame = AppendFrame | FlushFrame | CancelFrame | CloseFrame
_FRAMES: msgspec.json.Decoder[KoeFrame] = msgspec.json.Decoder(KoeFrame)
_CONTROL_FRAMES: dict[type[ClientMessage], Frame] = {
    Flush: FlushFrame(),
    Cancel: CancelFrame(),
    Close: CloseFrame(),
}


def decode_frame(data: str | bytes) -> KoeFrame | None:
    """``data`` as one of koe's plain requests, or ``None`` when it is anything else (another dialect, a
    setting, a request with more fields, or not JSON at all: the server's validating parser then says
    which). msgspec refuses what the validating parser refuses — bad UTF-8, lone surrogates, a conflicting
    second ``type`` — so a frame read here reads the same there, in a fraction of the time (the hot path:
    every ``append``)."""
    try:
        return _FRAMES.decode(data)
    # UnicodeEncodeError: a str holding a lone surrogate; RecursionError: nesting msgspec will not follow
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        return None


def encode_request(message: ClientMessage) -> str:
    """One client message as the JSON text frame koe's server parses back into ``message``.

    Always the koe dialect: an ``Append``'s or a control message's ``dialect`` field is not sent; options
    are sent only where set (``SessionOptions`` omits its ``None`` fields).
    """
    body: Frame | dict[str, Any]
    if isinstance(message, Append):
        body = AppendFrame(message.text)
    elif isinstance(message, Configure):
        body = {"type": "config", **msgspec.to_builtins(message.options)}
    elif isinstance(message, Request):
        body = {"text": message.text, **msgspec.to_builtins(message.options)}
        if message.request_id is not None:
            body["request_id"] = message.request_id
    else:
        body = _CONTROL_FRAMES[type(message)]
    return _ENCODER.encode(body).decode()
