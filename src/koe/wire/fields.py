"""Validators for the fields clients send (WebSocket messages, query strings, HTTP bodies).

Each returns the clean value or raises ``ConfigError`` with code ``invalid_field`` and a message that
names the field, says what was expected and shows (a bounded preview of) what was got.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from koe.audio.formats import AudioFormat, check_sample_rate, parse_format
from koe.errors import ConfigError, LimitError, ProtocolError
from koe.pipeline.params import validate_lang, validate_speed

#: A voice spec longer than this is no voice or blend we could hold (names, weights and '+').
MAX_VOICE_CHARS = 200
#: Formats a stream can carry frame by frame (no container); the value is the name used on the wire.
STREAM_FORMATS: dict[AudioFormat, str] = {
    AudioFormat.PCM: "pcm_s16le",
    AudioFormat.MULAW: "mulaw",
    AudioFormat.ALAW: "alaw",
}
#: Longer than any language tag (BCP 47's longest registered ones are well within it).
MAX_LANG_CHARS = 35
_FORMAT_ALIASES = {"linear16": "pcm"}  # Deepgram's name for raw 16-bit PCM
_PREVIEW_CHARS = 60


def preview(value: object) -> str:
    """A bounded rendering of a bad value for an error message (hostile input can be huge)."""
    shown = repr(value)
    return shown if len(shown) <= _PREVIEW_CHARS else shown[: _PREVIEW_CHARS - 3] + "..."


def _invalid(message: str) -> ConfigError:
    return ConfigError(message, code="invalid_field")


def bool_field(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be true or false, got {preview(value)}")
    return value


def voice_field(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_VOICE_CHARS:
        raise _invalid(
            f"voice must be a voice name or blend of at most {MAX_VOICE_CHARS} characters, "
            f"got {preview(value)}"
        )
    return value.strip()


def number_field(name: str, value: object, low: float, high: float) -> float:
    """A JSON number in ``[low, high]``. The range is checked before any conversion, so a 400-digit
    integer is refused like any number out of range rather than overflowing ``float()``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _invalid(f"{name} must be a number from {low:g} to {high:g}, got {preview(value)}")
    return float(value)


def speed_field(value: object) -> float:
    try:
        return validate_speed(value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


def sample_rate_field(value: object, fmt: AudioFormat = AudioFormat.PCM) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"sample_rate must be an integer, got {preview(value)}")
    try:
        return check_sample_rate(fmt, value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


def format_field(value: object, allowed: Collection[AudioFormat], names: Collection[str]) -> AudioFormat:
    """A format among ``allowed``; ``names`` are the spellings listed in the error message."""
    if not isinstance(value, str):
        raise _invalid(f"format must be a string, got {preview(value)}")
    try:
        fmt = parse_format(_FORMAT_ALIASES.get(value.strip().lower(), value))
    except ConfigError:
        fmt = None
    if fmt not in allowed:
        raise _invalid(f"format must be one of {', '.join(names)}, got {preview(value)}")
    assert fmt is not None  # None is never in allowed
    return fmt


def stream_format_field(value: object) -> AudioFormat:
    return format_field(value, STREAM_FORMATS, STREAM_FORMATS.values())


def lang_field(value: object) -> str:
    if not isinstance(value, str):
        raise _invalid(f"lang must be a string, a language tag such as en-us; got {preview(value)}")
    if len(value) > MAX_LANG_CHARS:
        raise _invalid(f"lang must be a language tag such as en-us, got {preview(value)}")
    try:
        return validate_lang(value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


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
