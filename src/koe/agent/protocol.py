"""The agent's requests without I/O: a browser frame or an invocation body in, a typed request out.

Two requests start a turn: ``ask`` (the LLM answers ``prompt``) and ``read`` (``text`` is streamed by the
replay simulation at ``tokens_per_s``, for hearing pure TTS streaming); ``interrupt`` is barge-in, with
``heard_segments`` when the client knows how much it played. docs/agent.md has examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koe.agent.replay import (
    DEFAULT_FIRST_TOKEN_DELAY_S,
    DEFAULT_TOKENS_PER_S,
    MAX_FIRST_TOKEN_DELAY_S,
    MAX_TOKENS_PER_S,
    MIN_TOKENS_PER_S,
    ReplayPace,
)
from koe.errors import ConfigError, ProtocolError
from koe.wire.body import body_media_type
from koe.wire.fields import lang_field, number_field, preview, speed_field, voice_field
from koe.wire.json import parse_object

#: The longest session id a client may choose.
MAX_SESSION_ID_CHARS = 128


@dataclass(frozen=True, slots=True)
class Ask:
    prompt: str
    voice: str | None = None
    speed: float = 1.0
    lang: str | None = None  # None: the voice's language


@dataclass(frozen=True, slots=True)
class Read:
    text: str
    pace: ReplayPace
    voice: str | None = None
    speed: float = 1.0
    lang: str | None = None


@dataclass(frozen=True, slots=True)
class Interrupt:
    heard_segments: int | None = None


TurnRequest = Ask | Read
ClientMessage = Ask | Read | Interrupt


def parse_message(data: str | bytes, *, max_bytes: int) -> ClientMessage:
    """One browser WebSocket frame: ``{"type": "ask" | "read" | "interrupt", ...}``.

    Raises:
        LimitError: the frame is over ``max_bytes``. ProtocolError: not a JSON object of a known type.
        ConfigError: a field has a bad value (``invalid_field``, naming it).
    """
    obj = parse_object(data, max_bytes=max_bytes)
    kind = obj.get("type")
    if kind == "interrupt":
        heard = obj.get("heard_segments")
        if heard is not None and (isinstance(heard, bool) or not isinstance(heard, int) or heard < 0):
            raise ConfigError(
                f"heard_segments must be an integer >= 0, got {preview(heard)}", code="invalid_field"
            )
        return Interrupt(heard)
    if kind in ("ask", "read"):
        return _turn_request(obj, read=kind == "read")
    raise ProtocolError(f"expected type to be one of ask, read, interrupt; got {preview(kind)}")


def parse_invocation(
    body: bytes, content_type: str | None, *, max_bytes: int
) -> tuple[TurnRequest, str | None]:
    """A ``POST /invocations`` JSON body: ``{"prompt": ...}`` or ``{"read": ...}``, with ``session_id``.

    Returns:
        The request and the session id it names (``None``: a conversation of one turn).

    Raises:
        as :func:`parse_message`; ConfigError: not JSON by its ``content_type`` (``unsupported_media_type``).
    """
    body_media_type(content_type)
    obj = parse_object(body, max_bytes=max_bytes, what="body")
    if ("prompt" in obj) == ("read" in obj):
        raise ProtocolError("expected exactly one of prompt (ask the LLM) or read (text to read aloud)")
    request = _turn_request({**obj, "text": obj.get("read")} if "read" in obj else obj, read="read" in obj)
    return request, session_id(obj.get("session_id"))


def session_id(value: object, what: str = "session_id") -> str | None:
    """A client-chosen session id (``what`` names where it came from), checked: printable, at most
    :data:`MAX_SESSION_ID_CHARS`; never echoed back when refused."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_SESSION_ID_CHARS
        or not value.isprintable()
    ):
        raise ConfigError(
            f"{what} must be 1 to {MAX_SESSION_ID_CHARS} printable characters", code="invalid_field"
        )
    return value


def _turn_request(obj: dict[str, Any], *, read: bool) -> TurnRequest:
    field = "text" if read else "prompt"
    text = obj.get(field)
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{field} must be a non-empty string", code="invalid_field")
    voice = None if obj.get("voice") is None else voice_field(obj["voice"])
    speed = 1.0 if obj.get("speed") is None else speed_field(obj["speed"])
    lang = None if obj.get("lang") is None else lang_field(obj["lang"])
    if not read:
        return Ask(text, voice, speed, lang)
    pace = ReplayPace(
        tokens_per_s=number_field(
            "tokens_per_s", obj.get("tokens_per_s", DEFAULT_TOKENS_PER_S), MIN_TOKENS_PER_S, MAX_TOKENS_PER_S
        ),
        first_token_delay_s=number_field(
            "first_token_delay_s",
            obj.get("first_token_delay_s", DEFAULT_FIRST_TOKEN_DELAY_S),
            0.0,
            MAX_FIRST_TOKEN_DELAY_S,
        ),
    )
    return Read(text, pace, voice, speed, lang)
