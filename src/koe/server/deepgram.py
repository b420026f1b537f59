"""Deepgram's REST TTS, ``POST /v1/speak?model=…&encoding=…&sample_rate=…&container=…`` with ``{"text"}``.

What the Deepgram SDK's ``speak.v1.audio.generate``, pipecat's ``DeepgramHttpTTSService`` and LiveKit's
Deepgram plugin (``synthesize()``) call. ``model`` names the voice (:func:`~koe.server.voices.aura_voice`);
``encoding`` and ``container`` pick the format as Deepgram defines them (docs/api.md). The audio streams as
it is synthesized, except FLAC, answered whole so that its header holds the length and checksum.
Responses carry Deepgram's ``dg-model-name``, ``dg-char-count`` and ``dg-request-id`` headers; refusals
Deepgram's ``{"err_code", "err_msg", "request_id"}`` body.
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
from koe.wire.body import read_body
from koe.wire.fields import preview, sample_rate_field
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
        if not rate.strip().isdigit():
            raise ConfigError(f"sample_rate must be an integer, got {preview(rate)}", code="invalid_field")
        return fmt, sample_rate_field(int(rate), fmt)


def parse_speak(
    body: bytes, query: Mapping[str, str], *, max_chars: int, default_voice: str
) -> SpeechRequest:
    """Deepgram's REST request: ``{"text": ...}`` and the query's voice, speed and format.

    Raises:
        ProtocolError, ConfigError: a malformed body or a bad parameter (400); LimitError (413).
    """
    obj = parse_object(body, max_bytes=None, what="body")
    text = nonempty(request_text(obj, "text", max_chars), "text")
    fmt, rate = speak_format(query)
    with field_named("model"):
        options = parse_query({name: query[name] for name in ("model", "voice", "speed") if name in query})
    return SpeechRequest(
        text=text,
        voice=options.voice or default_voice,
        speed=options.speed or 1.0,
        format=fmt,
        sample_rate=rate,
        stream=fmt is not AudioFormat.FLAC,
    )


async def speak(request: Request) -> Response:
    runtime = runtime_of(request)
    received_at = time.monotonic()
    runtime.synthesizer()  # not ready: 503 before reading a body
    settings = runtime.settings
    parsed = parse_speak(
        await read_body(request, settings.max_body_bytes, settings.body_timeout_s),
        request.query_params,
        max_chars=settings.max_request_chars,
        default_voice=settings.default_voice,
    )
    response = await respond(runtime, parsed, received_at, request.receive)
    response.headers["dg-model-name"] = request.query_params.get("model", parsed.voice)
    response.headers["dg-char-count"] = str(len(parsed.text))
    response.headers["dg-request-id"] = request_id_of(request)
    return response
