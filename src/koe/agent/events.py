"""What a voice-agent turn tells its client, and how each event is written on the wire (no I/O here).

Every turn emits ``turn`` first and ``done`` last; between them ``text_delta`` as the LLM writes,
``segment`` when a segment's audio begins, followed by its ``audio`` (one event, or for a segment decoded
in windows — a turn's first — one per piece as it is decoded), ``error`` for failures (a
failure that ends the turn is still followed by ``done``) and ``reconnected`` when the turn runs on a new
TTS connection because the last one closed. Over Server-Sent Events audio is base64 PCM16 inside the
JSON; over the browser WebSocket it is a JSON header and one binary frame per piece of at most
``AUDIO_FRAME_BYTES`` (AgentCore Runtime closes a WebSocket whose frame passes 32 KB).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from koe.wire.words import SpokenWord

#: The most PCM bytes in one binary WebSocket frame (0.34 s at 24 kHz), under AgentCore Runtime's 32 KB
#: frame limit with room to spare.
AUDIO_FRAME_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class SessionOpened:
    """The first message on a browser WebSocket: its session id (history lives as long as the socket)."""

    TYPE: ClassVar[str] = "session"
    session_id: str
    # what ``GET /info`` says, for a page that reaches the agent only through this socket (AgentCore)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnStarted:
    TYPE: ClassVar[str] = "turn"
    turn: int
    session_id: str
    source: str  # the LLM source's label
    simulated: bool  # True for the replay source: no model wrote this text


@dataclass(frozen=True, slots=True)
class TextDelta:
    TYPE: ClassVar[str] = "text_delta"
    turn: int
    text: str


@dataclass(frozen=True, slots=True)
class SegmentReady:
    TYPE: ClassVar[str] = "segment"
    turn: int
    index: int
    text: str
    source_span: tuple[int, int]  # in the turn's answer text
    duration_s: float | None  # None: its audio comes in pieces as decoded (the sum of their lengths)
    words: tuple[SpokenWord, ...] = ()  # seconds from the segment's first sample; spans in the answer


@dataclass(frozen=True, slots=True)
class AudioReady:
    TYPE: ClassVar[str] = "audio"
    turn: int
    index: int
    sample_rate: int
    pcm: bytes = field(repr=False)  # mono PCM16 little-endian


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The answer to an ``interrupt`` (browser WebSocket only): what the history now keeps of the turn."""

    TYPE: ClassVar[str] = "interrupted"
    turn: int
    heard_text: str


@dataclass(frozen=True, slots=True)
class Reconnected:
    """The turn runs on a new TTS connection: the previous one closed (``message`` says how)."""

    TYPE: ClassVar[str] = "reconnected"
    turn: int
    message: str


@dataclass(frozen=True, slots=True)
class TurnError:
    TYPE: ClassVar[str] = "error"
    turn: int | None  # None: the request was refused before a turn began
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Timings:
    """Milliseconds from the turn's start (``None``: it did not happen)."""

    first_token_ms: float | None = None
    first_audio_ms: float | None = None
    text_done_ms: float | None = None
    total_ms: float | None = None


@dataclass(frozen=True, slots=True)
class TurnDone:
    TYPE: ClassVar[str] = "done"
    turn: int
    text: str  # the answer as kept in the history: all of it, or what was heard before an interrupt
    interrupted: bool
    audio_s: float
    timings: Timings
    simulated: bool


AgentEvent = (
    SessionOpened
    | TurnStarted
    | TextDelta
    | SegmentReady
    | AudioReady
    | Interrupted
    | Reconnected
    | TurnError
    | TurnDone
)


def to_dict(event: AgentEvent) -> dict[str, Any]:
    """The event as a JSON object; audio as base64 (``audio``) with its byte count."""
    body: dict[str, Any] = {"type": event.TYPE}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, bytes):
            body["audio"] = base64.b64encode(value).decode("ascii")
            body["bytes"] = len(value)
        elif isinstance(value, Timings):
            body[f.name] = {t.name: getattr(value, t.name) for t in fields(value)}
        elif f.name == "words":
            body[f.name] = [word.to_json() for word in value]
        else:
            body[f.name] = list(value) if isinstance(value, tuple) else value
    return body


def to_sse(event: AgentEvent) -> str:
    """One Server-Sent Event: ``event:`` is the type, ``data:`` the JSON object (one line)."""
    data = json.dumps(to_dict(event), ensure_ascii=False, separators=(",", ":"))
    return f"event: {event.TYPE}\ndata: {data}\n\n"


def to_frames(event: AgentEvent) -> list[str | bytes]:
    """The event as WebSocket frames. Audio is, per piece of at most ``AUDIO_FRAME_BYTES`` (whole
    samples), a JSON header without the samples then one binary frame; the pieces of a segment share its
    ``index`` and come in order."""
    if isinstance(event, AudioReady):
        frames: list[str | bytes] = []
        for start in range(0, max(len(event.pcm), 1), AUDIO_FRAME_BYTES):
            piece = event.pcm[start : start + AUDIO_FRAME_BYTES]
            header = {
                "type": event.TYPE,
                "turn": event.turn,
                "index": event.index,
                "sample_rate": event.sample_rate,
                "bytes": len(piece),
            }
            frames += [json.dumps(header, separators=(",", ":")), piece]
        return frames
    return [json.dumps(to_dict(event), ensure_ascii=False, separators=(",", ":"))]
