"""The streaming protocol without I/O: a frame (text or binary) in, a typed message or an error out.

Three dialects share one session: koe's own messages (``append``/``flush``/``cancel``/...), the AWS
sample's untyped ``{"text": ...}`` request, and Deepgram-style ``Speak``/``Flush``/``Clear``/``Close``
(what pipecat's SageMaker TTS client sends). SageMaker forwards client payloads as binary frames unless the
client marks them UTF-8, so both frame kinds carry the same JSON. See docs/protocol.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, LimitError, ProtocolError
from koe.server.fields import (
    bool_field,
    lang_field,
    sample_rate_field,
    speed_field,
    stream_format_field,
    voice_field,
)
from koe.server.words import SpokenWord

_REQUEST_ID_TYPES = (str, int)


class Dialect(StrEnum):
    """Which client family sent a message, so replies come back in its own vocabulary."""

    KOE = "koe"
    AWS = "aws"
    DEEPGRAM = "deepgram"


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """Settings a client may change (``None`` = keep the current value)."""

    voice: str | None = None
    speed: float | None = None
    sample_rate: int | None = None
    format: AudioFormat | None = None
    lang: str | None = None
    words: bool | None = None  # ``words`` messages; unset: for koe turns only (docs/protocol.md)

    def merged_over(self, base: SessionOptions) -> SessionOptions:
        """These options where set, ``base``'s elsewhere."""
        return SessionOptions(
            **{
                f.name: getattr(base, f.name) if getattr(self, f.name) is None else getattr(self, f.name)
                for f in fields(self)
            }
        )


# --- client → server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Configure:
    options: SessionOptions


@dataclass(frozen=True, slots=True)
class Append:
    text: str
    dialect: Dialect


@dataclass(frozen=True, slots=True)
class Flush:
    dialect: Dialect


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

_CONTROL: dict[str, tuple[type[Flush | Cancel | Close], Dialect]] = {
    "flush": (Flush, Dialect.KOE),
    "cancel": (Cancel, Dialect.KOE),
    "close": (Close, Dialect.KOE),
    "Flush": (Flush, Dialect.DEEPGRAM),
    "Clear": (Cancel, Dialect.DEEPGRAM),
    "Close": (Close, Dialect.DEEPGRAM),
}
_TEXT_TYPES = {"append": Dialect.KOE, "Speak": Dialect.DEEPGRAM}
_TYPES = ", ".join(["config", *_TEXT_TYPES, *_CONTROL])


def parse_message(data: str | bytes, *, max_bytes: int, max_chars: int) -> ClientMessage:
    """Parse one WebSocket frame.

    Args:
        data: the frame's payload; binary frames must hold UTF-8 JSON.
        max_bytes: the largest frame accepted.
        max_chars: the most text one message may carry.

    Raises:
        LimitError: the frame (``message_too_large``) or its text (``text_too_long``) is over its limit.
        ProtocolError: not UTF-8 JSON (``invalid_json``) or not a message we know (``invalid_message``).
        ConfigError: a setting has a bad value (``invalid_field``).
    """
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise LimitError(
            f"message of {size} bytes is over the limit of {max_bytes}", code="message_too_large"
        )
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        obj = json.loads(text, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(
            f"expected a UTF-8 JSON object, got an unreadable frame: {exc}", code="invalid_json"
        ) from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind is None and "text" in obj:
        return Request(
            text=text_field(obj, max_chars),
            options=_options(obj),
            request_id=_request_id(obj.get("request_id")),
        )
    if kind == "config":
        return Configure(_options(obj))
    if isinstance(kind, str) and kind in _TEXT_TYPES:
        return Append(text_field(obj, max_chars), _TEXT_TYPES[kind])
    if isinstance(kind, str) and kind in _CONTROL:
        message, dialect = _CONTROL[kind]
        return message(dialect)
    raise ProtocolError(
        f'expected type to be one of {_TYPES} (or an untyped {{"text": ...}} request), got {kind!r}'
    )


def parse_query(params: Mapping[str, str]) -> SessionOptions:
    """Session options from the connect URL's query (SageMaker's ``ModelQueryString``).

    Unknown parameters are ignored: clients for other servers send their own (Deepgram's ``model``).
    ``encoding`` is accepted as another name for ``format``.

    Raises:
        ConfigError: a known parameter has a bad value (``invalid_field``).
    """
    raw: dict[str, Any] = {}
    for name in ("voice", "lang", "format"):
        if name in params:
            raw[name] = params[name]
    if "format" not in raw and "encoding" in params:
        raw["format"] = params["encoding"]
    if "speed" in params:
        raw["speed"] = _number(params["speed"], float, "speed")
    if "sample_rate" in params:
        raw["sample_rate"] = _number(params["sample_rate"], int, "sample_rate")
    if "words" in params:
        raw["words"] = _QUERY_BOOLS.get(params["words"].lower(), params["words"])
    return _options(raw)


_QUERY_BOOLS = {"true": True, "false": False}


def _number(raw: str, kind: type[int] | type[float], name: str) -> int | float:
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a {kind.__name__}, got {raw!r}", code="invalid_field") from None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def text_field(obj: Mapping[str, Any], max_chars: int, name: str = "text") -> str:
    """The text field ``name`` of a message or request body, within ``max_chars``."""
    text = obj.get(name)
    if not isinstance(text, str):
        raise ProtocolError(f"expected {name} to be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise LimitError(
            f"text of {len(text)} characters is over the limit of {max_chars} per message",
            code="text_too_long",
        )
    return text


def _request_id(value: object) -> str | int | None:
    if value is None or (isinstance(value, _REQUEST_ID_TYPES) and not isinstance(value, bool)):
        return value
    raise ProtocolError(f"expected request_id to be a string or an integer, got {type(value).__name__}")


def _options(obj: Mapping[str, Any]) -> SessionOptions:
    """Validate the settings fields present in ``obj``; each error names its field."""
    return SessionOptions(
        voice=None if obj.get("voice") is None else voice_field(obj["voice"]),
        speed=None if obj.get("speed") is None else speed_field(obj["speed"]),
        sample_rate=None if obj.get("sample_rate") is None else sample_rate_field(obj["sample_rate"]),
        format=None if obj.get("format") is None else stream_format_field(obj["format"]),
        lang=None if obj.get("lang") is None else lang_field(obj["lang"]),
        words=None if obj.get("words") is None else bool_field("words", obj["words"]),
    )


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
    TYPE: ClassVar[str] = "synthesis_complete"
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
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _json(value: Any) -> Any:
    if isinstance(value, SpokenWord):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    return value
