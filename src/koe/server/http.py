"""HTTP routes: SageMaker's ``/ping`` and ``/invocations``, OpenAI's speech API, Prometheus ``/metrics``."""

from __future__ import annotations

import logging
import time
from typing import cast

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from koe.errors import KoeError
from koe.logs import log_refusal
from koe.server.request_id import request_id_of
from koe.server.requests import OPENAI_MODELS, parse_invocation, parse_openai_speech
from koe.server.responses import respond
from koe.server.runtime import Runtime
from koe.wire.body import read_body
from koe.wire.errors import deepgram_error_body, error_body, openai_error_body, response_headers, route_of

logger = logging.getLogger(__name__)

#: Routes under this prefix answer errors in OpenAI's JSON shape, except Deepgram's route, in Deepgram's.
_OPENAI_PREFIX = "/v1/"
_DEEPGRAM_PATH = "/v1/speak"


def runtime_of(connection: HTTPConnection) -> Runtime:
    return cast(Runtime, connection.app.state.runtime)


async def koe_error(request: Request, exc: Exception) -> Response:
    """Starlette exception handler: every ``KoeError`` from an HTTP route, mapped in one place."""
    error = cast(KoeError, exc)
    runtime_of(request).metrics.errors.labels(error.code).inc()
    log_refusal(logger, f"{request.method} {request.url.path} refused", error)
    path = request.url.path
    if path == _DEEPGRAM_PATH:
        body = deepgram_error_body(error, request_id_of(request))
    elif path.startswith(_OPENAI_PREFIX):
        body = openai_error_body(error)
    else:
        body = error_body(error)
    return JSONResponse(body, status_code=route_of(error).http_status, headers=response_headers(error))


async def internal_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: a JSON 500 without internals (the traceback goes to the log)."""
    runtime_of(request).metrics.errors.labels("internal_error").inc()
    return JSONResponse(
        {"error": "internal_error", "message": "the server failed; see its log"}, status_code=500
    )


async def ping(request: Request) -> Response:
    """200 once the model is loaded and warmed up (naming any voice that failed to load); 503 before, with
    ``status`` ``loading`` or ``failed``, and while ``stopping``. Never a path: it needs no key."""
    runtime = runtime_of(request)
    try:
        voices = runtime.synthesizer().speech.voices
    except KoeError as exc:
        body = {"status": runtime.status, "error": exc.code, "message": exc.message}
        return JSONResponse(body, status_code=route_of(exc).http_status)
    unavailable = {"unavailable_voices": list(voices.unavailable)} if voices.unavailable else {}
    return JSONResponse({"status": "ready", **unavailable})


async def invocations(request: Request) -> Response:
    runtime = runtime_of(request)
    received_at = time.monotonic()
    runtime.synthesizer()  # not ready: 503 before reading a body
    settings = runtime.settings
    parsed = parse_invocation(
        await read_body(request, settings.max_body_bytes, settings.body_timeout_s),
        request.headers.get("content-type"),
        max_chars=settings.max_request_chars,
        max_age_s=settings.request_max_age_s,
        default_voice=settings.default_voice,
        now=time.time(),
    )
    return await respond(runtime, parsed, received_at, request.receive)


async def openai_speech(request: Request) -> Response:
    runtime = runtime_of(request)
    received_at = time.monotonic()
    runtime.synthesizer()
    settings = runtime.settings
    parsed = parse_openai_speech(
        await read_body(request, settings.max_body_bytes, settings.body_timeout_s),
        request.headers.get("content-type"),
        max_chars=settings.max_request_chars,
        voices=runtime.openai_voices,
    )
    return await respond(runtime, parsed, received_at, request.receive)


async def openai_models(request: Request) -> Response:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "koe"} for name in OPENAI_MODELS]
    return JSONResponse({"object": "list", "data": data})


async def openai_voices(request: Request) -> Response:
    """Every Kokoro voice with its language (koe's code and its name) and gender, and the OpenAI names
    mapped onto them."""
    speech = runtime_of(request).synthesizer().speech
    voices = [
        {"id": v.name, "name": v.name, "lang": v.lang, "language": v.language, "gender": v.gender}
        for v in speech.voices.info()
    ]
    names = speech.voices.names()
    aliases = {name: kokoro for name, kokoro in runtime_of(request).openai_voices.items() if kokoro in names}
    return JSONResponse({"voices": voices, "aliases": aliases})


async def metrics(request: Request) -> Response:
    body, media_type = runtime_of(request).metrics.render()
    return Response(body, media_type=media_type)
