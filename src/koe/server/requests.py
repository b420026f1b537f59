"""HTTP request bodies without I/O: bytes and a content type in, a validated request out.

``/invocations`` takes the AWS sample's JSON field for field (or a ``text/plain`` body);
``/v1/audio/speech`` takes OpenAI's. Every error names its field (see docs/api.md); an optional field
sent as ``null`` means its default, as it does for OpenAI's own API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, KoeError, LimitError, ProtocolError
from koe.pipeline.lexicon import caller_lexicon
from koe.types import SAMPLE_RATE
from koe.wire.body import JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE, body_media_type
from koe.wire.fields import (
    bool_field,
    format_field,
    lang_field,
    lexicon_field,
    preview,
    request_id_field,
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
#: The AWS sample's ``transport`` for Server-Sent Events.
_SSE = "sse"
#: Model names OpenAI clients send; all mean "the model this server runs".
OPENAI_MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
#: Timestamps in milliseconds are told apart from seconds by size (1e11 s is the year 5138).
_MS_THRESHOLD = 1e11
#: No clock reads more than this, in milliseconds (the year 5138 again).
_MAX_STAMP_MS = _MS_THRESHOLD * 1000


class Body(StrEnum):
    """What a response body carries: the audio itself, or Server-Sent Events in one API's vocabulary."""

    AUDIO = "audio"
    OPENAI_SSE = "openai_sse"  # speech.audio.delta / speech.audio.done
    AWS_SSE = "aws_sse"  # audio_stream_start / audio_chunk / audio_stream_end


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """What to say and how, for any route."""

    text: str
    voice: str
    speed: float
    format: AudioFormat
    sample_rate: int
    stream: bool
    body: Body = Body.AUDIO
    timestamps: bool = False  # word timings: in the SSE events, or a JSON body with the audio in base64
    request_id: str | int | None = None  # named in the AWS sample's events
    lang: str | None = None  # how the text is read; None: the voice's language
    lexicon: dict[str, dict[str, str]] | None = None  # the caller's (docs/pronunciation.md)

    @property
    def sse(self) -> bool:
        """Events, not the audio itself: always streamed."""
        return self.body is not Body.AUDIO


def optional(obj: Mapping[str, Any], name: str, default: Any) -> Any:
    """``obj[name]``, or ``default`` when it is missing or ``null``."""
    value = obj.get(name)
    return default if value is None else value


@contextmanager
def field_named(name: str) -> Iterator[None]:
    """Tag a refusal raised inside with the request field it is about (OpenAI's ``param``)."""
    try:
        yield
    except KoeError as exc:
        if exc.param is None:
            exc.param = name
        raise


def _bool(obj: Mapping[str, Any], name: str, default: bool) -> bool:
    return bool_field(name, optional(obj, name, default))


def nonempty(text: str, name: str) -> str:
    if not text.strip():
        raise ConfigError(f"{name} must contain something to say", code="invalid_field", param=name)
    return text


def _lang(obj: Mapping[str, Any]) -> str | None:
    return None if obj.get("lang") is None else lang_field(obj["lang"])


def _lexicon(obj: Mapping[str, Any]) -> dict[str, dict[str, str]] | None:
    """The request's own lexicon, checked now: a bad one is a 400 naming ``lexicon``."""
    if obj.get("lexicon") is None:
        return None
    with field_named("lexicon"):
        lexicon = lexicon_field(obj["lexicon"])
        caller_lexicon(lexicon)
    return lexicon


def parse_invocation(
    body: bytes, content_type: str | None, *, max_chars: int, max_age_s: float, default_voice: str, now: float
) -> SpeechRequest:
    """The AWS sample's request: ``{text, voice, speed, stream, format, sample_rate, request_timestamp?}``,
    plus koe's ``lang`` (how the text is read; default: the voice's language).

    ``"transport": "sse"`` (one version of the sample) answers Server-Sent Events instead of the audio
    body: ``audio_stream_start``, ``audio_chunk`` (base64, PCM16 unless ``format`` says otherwise),
    ``audio_stream_end``.

    Args:
        now: the current Unix time, against which ``request_timestamp`` is checked.

    Raises:
        ProtocolError, ConfigError: a malformed body or a bad field (400); ``unsupported_media_type``.
        LimitError: ``text_too_long`` (413).
        ConfigError: ``request_stale`` (408) when ``request_timestamp`` is older than ``max_age_s``.
    """
    if body_media_type(content_type, (JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE)) == TEXT_MEDIA_TYPE:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"text: expected UTF-8, got an undecodable body ({exc})", code="invalid_field"
            ) from exc
        if len(text) > max_chars:
            raise _too_long(len(text), max_chars)
        return SpeechRequest(nonempty(text, "text"), default_voice, 1.0, AudioFormat.WAV, SAMPLE_RATE, True)
    obj = parse_object(body, max_bytes=None, what="body")
    text = request_text(obj, "text", max_chars)
    fmt = format_field(optional(obj, "format", "wav"), INVOCATION_FORMATS, INVOCATION_FORMATS)
    stamp = obj.get("request_timestamp")
    if stamp is not None:
        _check_fresh(stamp, max_age_s, now)
    transport = optional(obj, "transport", None)
    if transport not in (None, _SSE):
        raise ConfigError(
            f"transport must be {_SSE!r} or absent, got {preview(transport)}", code="invalid_field"
        )
    stream = _bool(obj, "stream", True)
    if transport == _SSE and not stream:
        raise ConfigError(
            f"stream must be true with transport {_SSE!r}: events are streamed", code="invalid_field"
        )
    if transport == _SSE and obj.get("format") is None:
        fmt = AudioFormat.PCM  # the sample's own audio: PCM16 in each audio_chunk
    return SpeechRequest(
        text=nonempty(text, "text"),
        voice=voice_field(optional(obj, "voice", default_voice)),
        speed=speed_field(optional(obj, "speed", 1.0)),
        format=fmt,
        sample_rate=sample_rate_field(optional(obj, "sample_rate", SAMPLE_RATE), fmt),
        stream=stream,
        body=Body.AWS_SSE if transport == _SSE else Body.AUDIO,
        request_id=request_id_field(obj.get("request_id")),
        lang=_lang(obj),
        lexicon=_lexicon(obj),
    )


def request_text(obj: Mapping[str, Any], name: str, max_chars: int) -> str:
    """The body's text field ``name``: a string (``invalid_field``) within ``max_chars`` (413)."""
    try:
        return text_field(obj, max_chars, name)
    except LimitError:
        raise _too_long(len(obj[name]), max_chars) from None
    except ProtocolError as exc:
        raise ConfigError(exc.message, code="invalid_field", param=name) from exc


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


def parse_openai_speech(
    body: bytes, content_type: str | None, *, max_chars: int, voices: Mapping[str, str]
) -> SpeechRequest:
    """OpenAI's ``{model, input, voice, response_format, speed, stream_format?, instructions?}``, plus
    koe's ``timestamps`` (word timings; OpenAI has no field for them) and ``lang`` (OpenAI reads the
    language from the text; Kokoro's voices each speak one, so the voice's is the default).

    ``voice`` may be an OpenAI name (mapped by ``voices``, :func:`~koe.server.voices.openai_voices`), a
    Kokoro voice or blend, or ``{"id": ...}``. ``instructions`` is accepted and ignored (Kokoro takes no
    style prompt). FLAC is answered as one complete file (its header then holds the length and checksum
    that libsndfile needs); every other format streams. Each refusal names its field as ``param``.
    """
    body_media_type(content_type)
    obj = parse_object(body, max_bytes=None, what="body")
    with field_named("model"):
        model = obj.get("model")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(
                f"model must be a model name such as {', '.join(OPENAI_MODELS)}, got {preview(model)}",
                code="invalid_field",
            )
    text = nonempty(request_text(obj, "input", max_chars), "input")
    with field_named("voice"):
        voice = obj.get("voice")
        if isinstance(voice, dict):
            voice = voice.get("id")
        spec = voice_field(voice)
    with field_named("stream_format"):
        stream_format = optional(obj, "stream_format", "audio")
        if stream_format not in ("audio", "sse"):
            raise ConfigError(
                f"stream_format must be audio or sse, got {preview(stream_format)}", code="invalid_field"
            )
    with field_named("speed"):
        speed = speed_field(optional(obj, "speed", 1.0))
    with field_named("response_format"):
        fmt = format_field(optional(obj, "response_format", "mp3"), OPENAI_FORMATS, OPENAI_FORMATS)
    with field_named("timestamps"):
        timestamps = _bool(obj, "timestamps", False)
    sse = stream_format == "sse"
    return SpeechRequest(
        text=text,
        voice=voices.get(spec.lower(), spec),
        speed=speed,
        format=fmt,
        sample_rate=SAMPLE_RATE,
        stream=sse or fmt is not AudioFormat.FLAC,
        body=Body.OPENAI_SSE if sse else Body.AUDIO,
        timestamps=timestamps,
        lang=_lang(obj),
        lexicon=_lexicon(obj),
    )
