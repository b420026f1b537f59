"""HTTP request bodies without I/O: bytes and a content type in, a validated request out.

``/invocations`` takes the AWS sample's JSON field for field (or a ``text/plain`` body);
``/v1/audio/speech`` takes OpenAI's. Every error names its field (see docs/api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, LimitError, ProtocolError
from koe.types import SAMPLE_RATE
from koe.wire.fields import (
    bool_field,
    format_field,
    preview,
    sample_rate_field,
    speed_field,
    text_field,
    voice_field,
)
from koe.wire.json import parse_object

#: Formats ``/invocations`` offers (the AWS sample's set).
INVOCATION_FORMATS = (
    AudioFormat.WAV, AudioFormat.PCM, AudioFormat.MP3, AudioFormat.OPUS, AudioFormat.FLAC,
    AudioFormat.MULAW, AudioFormat.ALAW,
)  # fmt: skip
#: Formats ``/v1/audio/speech`` offers (OpenAI's set).
OPENAI_FORMATS = (
    AudioFormat.MP3, AudioFormat.OPUS, AudioFormat.AAC, AudioFormat.FLAC, AudioFormat.WAV, AudioFormat.PCM,
)  # fmt: skip
#: OpenAI's voices → the closest Kokoro voice (same name where Kokoro has one).
OPENAI_VOICES: dict[str, str] = {
    "alloy": "af_alloy",
    "ash": "am_adam",
    "ballad": "bm_george",
    "coral": "af_heart",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    "sage": "af_sarah",
    "shimmer": "af_sky",
    "verse": "am_michael",
    "marin": "af_bella",
    "cedar": "am_eric",
}
#: Model names OpenAI clients send; all mean "the model this server runs".
OPENAI_MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
#: Timestamps in milliseconds are told apart from seconds by size (1e11 s is the year 5138).
_MS_THRESHOLD = 1e11
#: No clock reads more than this, in milliseconds (the year 5138 again).
_MAX_STAMP_MS = _MS_THRESHOLD * 1000


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """What to say and how, for either route."""

    text: str
    voice: str
    speed: float
    format: AudioFormat
    sample_rate: int
    stream: bool
    sse: bool = False
    timestamps: bool = False  # word timings: in the SSE events, or a JSON body with the audio in base64


def _media_type(content_type: str | None) -> str:
    return (content_type or "application/json").split(";")[0].strip().lower()


def _bool(obj: Mapping[str, Any], name: str, default: bool) -> bool:
    return bool_field(name, obj.get(name, default))


def _nonempty(text: str, name: str) -> str:
    if not text.strip():
        raise ConfigError(f"{name} must contain something to say", code="invalid_field")
    return text


def parse_invocation(
    body: bytes, content_type: str | None, *, max_chars: int, max_age_s: float, default_voice: str, now: float
) -> SpeechRequest:
    """The AWS sample's request: ``{text, voice, speed, stream, format, sample_rate, request_timestamp?}``.

    Args:
        now: the current Unix time, against which ``request_timestamp`` is checked.

    Raises:
        ProtocolError, ConfigError: a malformed body or a bad field (400); ``unsupported_media_type``.
        LimitError: ``text_too_long`` (413).
        ConfigError: ``request_stale`` (408) when ``request_timestamp`` is older than ``max_age_s``.
    """
    media = _media_type(content_type)
    if media == "text/plain":
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"text: expected UTF-8, got an undecodable body ({exc})", code="invalid_field"
            ) from exc
        if len(text) > max_chars:
            raise _too_long(len(text), max_chars)
        return SpeechRequest(_nonempty(text, "text"), default_voice, 1.0, AudioFormat.WAV, SAMPLE_RATE, True)
    if media != "application/json":
        raise ConfigError(
            f"expected application/json or text/plain, got {preview(content_type)}",
            code="unsupported_media_type",
        )
    obj = parse_object(body, max_bytes=None, what="body")
    try:
        text = text_field(obj, max_chars)
    except LimitError:
        raise _too_long(len(obj["text"]), max_chars) from None
    except ProtocolError as exc:
        raise ConfigError(exc.message, code="invalid_field") from exc
    fmt = format_field(obj.get("format", "wav"), INVOCATION_FORMATS, INVOCATION_FORMATS)
    stamp = obj.get("request_timestamp")
    if stamp is not None:
        _check_fresh(stamp, max_age_s, now)
    return SpeechRequest(
        text=_nonempty(text, "text"),
        voice=voice_field(obj.get("voice", default_voice)),
        speed=speed_field(obj.get("speed", 1.0)),
        format=fmt,
        sample_rate=sample_rate_field(obj.get("sample_rate", SAMPLE_RATE), fmt),
        stream=_bool(obj, "stream", True),
    )


def _too_long(chars: int, limit: int) -> LimitError:
    return LimitError(f"text of {chars} characters is over the limit of {limit}", code="text_too_long")


def _check_fresh(stamp: object, max_age_s: float, now: float) -> None:
    """``request_timestamp``: Unix seconds (or milliseconds) or ISO 8601 (UTC when no zone is given), at
    most ``max_age_s`` old and at most as far in the future (clocks differ, but not by more than that)."""
    if isinstance(stamp, bool) or not isinstance(stamp, int | float | str):
        raise ConfigError(
            f"request_timestamp must be Unix time or ISO 8601, got {preview(stamp)}", code="invalid_field"
        )
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp)
            seconds = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError):  # not ISO 8601, or a date that has no Unix time
            raise ConfigError(
                f"request_timestamp must be ISO 8601, got {preview(stamp)}", code="invalid_field"
            ) from None
    else:
        # compared before any conversion: NaN and a 400-digit integer both fail here, neither overflows
        if not -_MAX_STAMP_MS <= stamp <= _MAX_STAMP_MS:
            raise ConfigError(
                f"request_timestamp must be Unix seconds or milliseconds, got {preview(stamp)}",
                code="invalid_field",
            )
        seconds = stamp / 1000 if stamp > _MS_THRESHOLD else float(stamp)
    age = now - seconds
    if age > max_age_s:
        raise ConfigError(
            f"request is {age:.1f} s old, older than the limit of {max_age_s:g} s", code="request_stale"
        )
    if -age > max_age_s:
        raise ConfigError(
            f"request_timestamp is {-age:.1f} s in the future; clocks may differ by at most {max_age_s:g} s",
            code="invalid_field",
        )


def parse_openai_speech(body: bytes, content_type: str | None, *, max_chars: int) -> SpeechRequest:
    """OpenAI's ``{model, input, voice, response_format, speed, stream_format?, instructions?}``, plus
    koe's ``timestamps`` (word timings; OpenAI has no field for them).

    ``voice`` may be an OpenAI name (mapped, see :data:`OPENAI_VOICES`), a Kokoro voice or blend, or
    ``{"id": ...}``. ``instructions`` is accepted and ignored (Kokoro takes no style prompt).
    """
    if _media_type(content_type) != "application/json":
        raise ConfigError(
            f"expected application/json, got {preview(content_type)}", code="unsupported_media_type"
        )
    obj = parse_object(body, max_bytes=None, what="body")
    model = obj.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(
            f"model must be a model name such as {', '.join(OPENAI_MODELS)}, got {preview(model)}",
            code="invalid_field",
        )
    try:
        text = text_field(obj, max_chars, "input")
    except LimitError:
        raise _too_long(len(obj["input"]), max_chars) from None
    except ProtocolError as exc:
        raise ConfigError(exc.message, code="invalid_field") from exc
    voice = obj.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    spec = voice_field(voice)
    stream_format = obj.get("stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise ConfigError(
            f"stream_format must be audio or sse, got {preview(stream_format)}", code="invalid_field"
        )
    return SpeechRequest(
        text=_nonempty(text, "input"),
        voice=OPENAI_VOICES.get(spec.lower(), spec),
        speed=speed_field(obj.get("speed", 1.0)),
        format=format_field(obj.get("response_format", "mp3"), OPENAI_FORMATS, OPENAI_FORMATS),
        sample_rate=SAMPLE_RATE,
        stream=True,
        sse=stream_format == "sse",
        timestamps=_bool(obj, "timestamps", False),
    )
