"""Wyoming, Home Assistant's local voice protocol, as far as a TTS server speaks it; no I/O.

An event on the wire is one JSON header line (``type``, optional ``data``, ``data_length``,
``payload_length``, ``version``), then ``data_length`` bytes of JSON merged over the header's ``data``, then
``payload_length`` bytes of payload. :class:`EventDecoder` turns the bytes of a connection into
:class:`RawEvent`\\ s, whatever their split; :func:`parse_event` makes one a typed request; :func:`encode`
turns a typed answer into bytes. The session (:mod:`koe.server.wyoming_session`) reads and writes.

Every length is bounded before anything is buffered. An error that leaves the next event's start known
(bad JSON on a header line, an unknown type, a bad field) costs that event only; one that loses it (a
header line or length over its bound, a length that is no number) leaves the decoder :attr:`lost
<EventDecoder.lost>`, and the connection cannot go on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koe.errors import ConfigError, KoeError, LimitError, ProtocolError
from koe.languages import Language, language
from koe.wire.fields import MAX_LANG_CHARS, preview, text_field, voice_field
from koe.wire.json import parse_object

#: The Wyoming release whose events these are (``synthesize-start`` … ``synthesize-stopped`` came in 1.7);
#: sent as every event's ``version``.
PROTOCOL_VERSION = "1.10.2"
#: A header line, its newline included. The reference client reads lines with asyncio's default 64 KiB
#: limit and puts ``data`` after the line, so no client of it comes near this.
MAX_HEADER_BYTES = 64 * 1024
#: An event's ``data`` section: a ``synthesize`` carries a whole answer, and 1 MiB holds 100,000 characters
#: (``max_turn_chars``' default) even when every one is escaped as ``\uXXXX``.
MAX_DATA_BYTES = 1024 * 1024
#: No event a TTS server takes has a payload (audio flows the other way); a client that sends one anyway
#: is answered once it has arrived, up to this size, and a larger one ends the connection.
MAX_PAYLOAD_BYTES = 64 * 1024
#: A ``ping``'s text, echoed in its ``pong``: a satellite sends a short token or nothing; an echo is no place
#: for a whole answer.
MAX_PING_CHARS = 1024
#: The ``text_format`` values taken: plain text (where a text that starts with ``<speak`` is SSML, as on
#: every koe transport) and SSML (a fragment without its ``<speak>`` root gets one).
TEXT_FORMATS = ("text", "ssml")
#: Kokoro's output as Wyoming describes audio: 16-bit samples, one channel.
SAMPLE_WIDTH = 2
CHANNELS = 1
_NEWLINE = b"\n"


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One event as framed: its type, its ``data`` (the header's with the data section merged over it) and
    its payload."""

    type: str
    data: dict[str, Any]
    payload: bytes = b""


class EventDecoder:
    """The events of one connection's bytes, in order; :meth:`feed` what arrives, then take :meth:`next`
    until it says ``None``. Not thread-safe."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._header: dict[str, Any] | None = None  # a header read, waiting for its data and payload
        self._data_length = 0
        self._payload_length = 0
        self._lost: KoeError | None = None

    @property
    def lost(self) -> bool:
        """An error lost the start of the next event: every later :meth:`next` raises it again."""
        return self._lost is not None

    @property
    def partial(self) -> bool:
        """Bytes of an unfinished event are held (the session's deadline for a slow client runs)."""
        return bool(self._buffer) or self._header is not None

    @property
    def in_body(self) -> bool:
        """The header of the unfinished event was read; its data or payload is still arriving."""
        return self._header is not None

    def feed(self, data: bytes) -> None:
        """More bytes of the connection, any split."""
        self._buffer += data

    def next(self) -> RawEvent | None:
        """The next complete event, or ``None`` until more bytes arrive.

        Raises:
            LimitError: a header line, data or payload over its bound (``message_too_large``); lost.
            ProtocolError: a length that is no number (lost); a header line that is not a JSON object, or an
                event without a type or with data that is no JSON object (``invalid_json`` /
                ``invalid_message``: that event is skipped, the next one is read).
        """
        if self._lost is not None:
            raise self._lost
        if self._header is None and not self._read_header():
            return None
        header = self._header
        assert header is not None  # read just now or by an earlier call
        end = self._data_length + self._payload_length
        if len(self._buffer) < end:
            return None
        data_bytes = bytes(self._buffer[: self._data_length])
        payload = bytes(self._buffer[self._data_length : end])
        del self._buffer[:end]
        self._header = None
        return _event(header, data_bytes, payload)

    def _read_header(self) -> bool:
        """Take the next header line if it is complete (its lengths then known); whether it was."""
        end = self._buffer.find(_NEWLINE, 0, MAX_HEADER_BYTES)
        if end < 0:
            if len(self._buffer) >= MAX_HEADER_BYTES:
                self._lose(
                    LimitError(
                        f"expected an event's header line within {MAX_HEADER_BYTES} bytes, got "
                        f"{len(self._buffer)} bytes without a newline",
                        code="message_too_large",
                    )
                )
            return False
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        header = parse_object(line, max_bytes=None, what="event header line")
        self._data_length = self._length(header, "data_length", MAX_DATA_BYTES)
        self._payload_length = self._length(header, "payload_length", MAX_PAYLOAD_BYTES)
        self._header = header
        return True

    def _length(self, header: Mapping[str, Any], name: str, limit: int) -> int:
        value = header.get(name)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self._lose(ProtocolError(f"expected {name} to be a whole number >= 0, got {preview(value)}"))
        if value > limit:
            self._lose(
                LimitError(f"{name} of {value} bytes is over the limit of {limit}", code="message_too_large")
            )
        return int(value)

    def _lose(self, error: KoeError) -> None:
        self._buffer.clear()
        self._lost = error
        raise error


def _event(header: Mapping[str, Any], data_bytes: bytes, payload: bytes) -> RawEvent:
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise ProtocolError(f"expected the event's type to be a non-empty string, got {preview(kind)}")
    data = header.get("data")
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        raise ProtocolError(f"expected the {kind} event's data to be a JSON object, got {preview(data)}")
    if data_bytes:
        data = {**data, **parse_object(data_bytes, max_bytes=None, what=f"{kind} event's data")}
    return RawEvent(kind, data, payload)


# --- what a client asks ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoiceChoice:
    """Wyoming's ``voice``: a name from ``info`` (any Kokoro voice or blend), which overrides the language;
    or a language tag alone, as the client wrote it (:func:`wyoming_language` reads it), whose default
    voice speaks."""

    name: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class Describe:
    """``describe``: answered with ``info``."""


@dataclass(frozen=True, slots=True)
class Synthesize:
    """``synthesize``: the whole text at once. Inside a streamed request it repeats the chunks' text for
    servers that do not stream, and a streaming server ignores it."""

    text: str
    voice: VoiceChoice | None = None
    ssml: bool = False  # ``text_format`` ``ssml``


@dataclass(frozen=True, slots=True)
class SynthesizeStart:
    """``synthesize-start``: a streamed request opens; its text follows in chunks."""

    voice: VoiceChoice | None = None
    ssml: bool = False


@dataclass(frozen=True, slots=True)
class SynthesizeChunk:
    """``synthesize-chunk``: more of the streamed request's text, as the LLM writes it."""

    text: str


@dataclass(frozen=True, slots=True)
class SynthesizeStop:
    """``synthesize-stop``: the streamed request's text is complete."""


@dataclass(frozen=True, slots=True)
class Ping:
    """``ping``: is the server there? Answered with a ``pong`` carrying ``text`` back, before any audio
    queued for the connection."""

    text: str | None = None


ClientEvent = Describe | Synthesize | SynthesizeStart | SynthesizeChunk | SynthesizeStop | Ping
_TYPES = ("describe", "synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop", "ping")


def parse_event(event: RawEvent, *, max_chars: int) -> ClientEvent:
    """The request ``event`` makes; texts of at most ``max_chars`` characters.

    Raises:
        ProtocolError: a type a TTS server does not take, or a text that is no string.
        LimitError: a text over ``max_chars``, or a ping's over ``MAX_PING_CHARS`` (``text_too_long``).
        ConfigError: a voice that is no name or language tag, or a ``text_format`` other than plain text
            or SSML (``invalid_field``). Whether koe has the voice or speaks the language is the session's to
            find out: the request is well formed, and is answered (with an error) in its turn.
    """
    data = event.data
    match event.type:
        case "describe":
            return Describe()
        case "synthesize":
            return Synthesize(text_field(data, max_chars), _voice(data), _is_ssml(data))
        case "synthesize-start":
            return SynthesizeStart(_voice(data), _is_ssml(data))
        case "synthesize-chunk":
            return SynthesizeChunk(text_field(data, max_chars))
        case "synthesize-stop":
            return SynthesizeStop()
        case "ping":
            return Ping(None if data.get("text") is None else text_field(data, MAX_PING_CHARS))
    raise ProtocolError(
        f"expected an event a TTS server takes ({', '.join(_TYPES)}), got {preview(event.type)}"
    )


def _is_ssml(data: Mapping[str, Any]) -> bool:
    """Whether the request's ``text_format`` says its text is SSML."""
    text_format = data.get("text_format")
    if text_format is not None and text_format not in TEXT_FORMATS:
        raise ConfigError(
            f"text_format must be one of {', '.join(TEXT_FORMATS)}, got {preview(text_format)}",
            code="invalid_field",
        )
    return text_format == "ssml"


def _voice(data: Mapping[str, Any]) -> VoiceChoice | None:
    """The event's ``voice``; its ``speaker`` is ignored (no Kokoro voice has several)."""
    voice = data.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, dict):
        raise ConfigError(
            f"voice must be an object with a name or a language, got {preview(voice)}", code="invalid_field"
        )
    name, tag = voice.get("name"), voice.get("language")
    if name is not None:
        return VoiceChoice(name=voice_field(name))
    if tag is None:
        return None
    if not isinstance(tag, str) or not tag.strip() or len(tag) > MAX_LANG_CHARS:
        raise ConfigError(
            f"language must be a language tag such as en-US, got {preview(tag)}", code="invalid_field"
        )
    return VoiceChoice(language=tag)


def wyoming_language(tag: str) -> Language:
    """The language a Wyoming ``language`` names: a tag as Home Assistant sends it (``en-US``, ``en_GB``,
    ``fr``), or its primary language when koe has no entry for the region (``es-MX`` is Spanish).

    Raises:
        ConfigError: not a language Kokoro speaks (``invalid_field``), listing those it does.
    """
    try:
        return language(tag)
    except ConfigError:
        primary = tag.strip().replace("_", "-").partition("-")[0]
        try:
            return language(primary)
        except ConfigError as exc:
            raise ConfigError(exc.message, code="invalid_field") from exc


def language_tag(code: str) -> str:
    """koe's language code as the BCP 47 tag Home Assistant lists languages by (``en-us`` → ``en-US``)."""
    primary, _, region = code.partition("-")
    return f"{primary}-{region.upper()}" if region else primary


# --- what the server answers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attribution:
    name: str
    url: str


@dataclass(frozen=True, slots=True)
class InfoVoice:
    """One voice of ``info``: its name (what ``synthesize`` names), its languages and a description."""

    name: str
    languages: tuple[str, ...]
    description: str


@dataclass(frozen=True, slots=True)
class Info:
    """``info``: the one TTS program this server is, with every voice it speaks and whether it streams;
    ``attribution`` credits the voices' model (the program's and each voice's)."""

    name: str
    description: str
    version: str
    attribution: Attribution
    voices: Sequence[InfoVoice]
    streaming: bool = True


@dataclass(frozen=True, slots=True)
class AudioStart:
    rate: int


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """PCM, ``SAMPLE_WIDTH`` bytes per sample, mono, at ``rate``."""

    rate: int
    audio: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class AudioStop:
    pass


@dataclass(frozen=True, slots=True)
class SynthesizeStopped:
    """The streamed request is answered: every audio event of it was sent."""


@dataclass(frozen=True, slots=True)
class Pong:
    """``pong``: the answer to a ``ping``, its text echoed."""

    text: str | None = None


@dataclass(frozen=True, slots=True)
class Error:
    code: str
    text: str


ServerEvent = Info | AudioStart | AudioChunk | AudioStop | SynthesizeStopped | Pong | Error


def encode(event: ServerEvent) -> bytes:
    """``event``'s bytes: the header line, the data section, the payload."""
    match event:
        case Info():
            return _frame("info", {"tts": [_program(event)]})
        case AudioStart(rate=rate):
            return _frame("audio-start", _format(rate))
        case AudioChunk(rate=rate, audio=audio):
            return _frame("audio-chunk", _format(rate), audio)
        case AudioStop():
            return _frame("audio-stop")
        case SynthesizeStopped():
            return _frame("synthesize-stopped")
        case Pong(text=text):
            return _frame("pong", {"text": text})
        case Error(code=code, text=text):
            return _frame("error", {"text": text, "code": code})


def _format(rate: int) -> dict[str, Any]:
    return {"rate": rate, "width": SAMPLE_WIDTH, "channels": CHANNELS}


def _program(info: Info) -> dict[str, Any]:
    return {
        "name": info.name,
        "attribution": _attribution(info.attribution),
        "installed": True,
        "description": info.description,
        "version": info.version,
        "voices": [
            {
                "name": voice.name,
                "attribution": _attribution(info.attribution),
                "installed": True,
                "description": voice.description,
                "version": None,
                "languages": list(voice.languages),
                "speakers": None,
            }
            for voice in info.voices
        ],
        "supports_synthesize_streaming": info.streaming,
    }


def _attribution(attribution: Attribution) -> dict[str, str]:
    return {"name": attribution.name, "url": attribution.url}


def _frame(kind: str, data: Mapping[str, Any] | None = None, payload: bytes = b"") -> bytes:
    """Data goes in its own section after the header line, as the reference library sends it, so the line
    stays short whatever the data holds."""
    header: dict[str, Any] = {"type": kind, "version": PROTOCOL_VERSION}
    data_bytes = json.dumps(data, ensure_ascii=False).encode() if data else b""
    if data_bytes:
        header["data_length"] = len(data_bytes)
    if payload:
        header["payload_length"] = len(payload)
    return json.dumps(header).encode() + _NEWLINE + data_bytes + payload
