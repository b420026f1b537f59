"""Deepgram's REST TTS, ``POST /v1/speak?model=…&encoding=…&sample_rate=…&container=…`` with ``{"text"}``.

What the Deepgram SDK's ``speak.v1.audio.generate``, pipecat's ``DeepgramHttpTTSService`` and LiveKit's
Deepgram plugin (``synthesize()``) call. ``model`` names the voice
(:func:`~koe.server.dialects.deepgram.aura_voice`); ``encoding`` and ``container`` pick the format as Deepgram
defines them (docs/api.md). The audio streams as
it is synthesized, except FLAC, answered whole so that its header holds the length and checksum.
Responses carry Deepgram's ``dg-model-name``, ``dg-char-count`` and ``dg-request-id`` headers; refusals
Deepgram's ``{"err_code", "err_msg", "request_id"}`` body. Every value a header echoes is checked with the
rest of the request, before the synthesis is admitted: a header that fails once the response exists would
leave it admitted and never sent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError
from koe.server.http import runtime_of
from koe.server.protocol import parse_query
from koe.server.request_id import request_id_of
from koe.server.requests import SpeechRequest, field_named, nonempty, request_text
from koe.server.responses import respond
from koe.types import SAMPLE_RATE
from koe.wire.body import body_media_type, read_body
from koe.wire.fields import MAX_VOICE_CHARS, header_value_field, int_query_field, preview, sample_rate_field
from koe.wire.json import parse_object

#: Deepgram's encodings → (the format for each container it allows, its default container).
_ENCODINGS: dict[str, tuple[dict[str, AudioFormat], str]] = {
    "linear16": ({"wav": AudioFormat.WAV, "none": AudioFormat.PCM}, "wav"),
    "mulaw": ({"none": AudioFormat.MULAW}, "none"),
    "alaw": ({"none": AudioFormat.ALAW}, "none"),
    "mp3": ({"none": AudioFormat.MP3}, "none"),
    "opus": ({"ogg": AudioFormat.OPUS}, "ogg"),
    "flac": ({"none": AudioFormat.FLAC}, "none"),
    "aac": ({"none": AudioFormat.AAC}, "none"),
}
#: Deepgram's default when no ``encoding`` is given.
_DEFAULT_ENCODING = "mp3"
#: Telephony encodings default to telephony's rate, as Deepgram's do.
_TELEPHONY_RATE = 8000


def speak_format(query: Mapping[str, str]) -> tuple[AudioFormat, int]:
    """The format and rate ``encoding``, ``container`` and ``sample_rate`` ask for.

    Raises:
        ConfigError: an encoding koe does not speak, a container that does not fit it, a bad rate.
    """
    encoding = query.get("encoding", _DEFAULT_ENCODING).strip().lower()
    if encoding not in _ENCODINGS:
        raise ConfigError(
            f"encoding must be one of {', '.join(_ENCODINGS)}, got {preview(encoding)}",
            code="invalid_field",
            param="encoding",
        )
    containers, default = _ENCODINGS[encoding]
    container = query.get("container", default).strip().lower()
    if container not in containers:
        raise ConfigError(
            f"container for {encoding} must be {' or '.join(containers)}, got {preview(container)}",
            code="invalid_field",
            param="container",
        )
    fmt = containers[container]
    telephony = fmt in (AudioFormat.MULAW, AudioFormat.ALAW)
    rate = query.get("sample_rate")
    with field_named("sample_rate"):
        if rate is None:
            return fmt, _TELEPHONY_RATE if telephony else SAMPLE_RATE
        return fmt, sample_rate_field(int_query_field("sample_rate", rate), fmt)


def parse_speak(
    body: bytes, content_type: str | None, query: Mapping[str, str], *, max_chars: int, default_voice: str
) -> tuple[SpeechRequest, str]:
    """Deepgram's REST request: ``{"text": ...}`` and the query's voice, speed and format.

    Returns:
        The request, and the model name its ``dg-model-name`` header echoes (the voice without a model).

    Raises:
        ProtocolError, ConfigError: a malformed body or a bad parameter (400), ``unsupported_media_type``
            (415); LimitError (413).
    """
    body_media_type(content_type)
    obj = parse_object(body, max_bytes=None, what="body")
    text = nonempty(request_text(obj, "text", max_chars), "text")
    fmt, rate = speak_format(query)
    with field_named("model"):
        options = parse_query({name: query[name] for name in ("model", "voice", "speed") if name in query})
    voice = options.voice or default_voice
    echoed = "model" if query.get("model") else "voice"
    model_name = header_value_field(echoed, query.get("model") or voice, MAX_VOICE_CHARS)
    request = SpeechRequest(
        text=text,
        voice=voice,
        speed=options.speed or 1.0,
        format=fmt,
        sample_rate=rate,
        stream=fmt is not AudioFormat.FLAC,
    )
    return request, model_name


async def speak(request: Request) -> Response:
    runtime = runtime_of(request)
    received_at = time.monotonic()
    runtime.synthesizer()  # not ready: 503 before reading a body
    settings = runtime.settings
    parsed, model_name = parse_speak(
        await read_body(request, settings.max_body_bytes, settings.body_timeout_s),
        request.headers.get("content-type"),
        request.query_params,
        max_chars=settings.max_request_chars,
        default_voice=settings.default_voice,
    )
    headers = {
        "dg-model-name": model_name,
        "dg-char-count": str(len(parsed.text)),
        "dg-request-id": request_id_of(request),  # header-safe: the middleware echoes only such ids
    }
    response = await respond(runtime, parsed, received_at, request.receive)
    response.headers.update(headers)
    return response
