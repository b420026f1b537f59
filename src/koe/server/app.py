"""The TTS server's Starlette app: every route, its lifespan, and the WebSocket endpoint.

It knows nothing of what else shares the process: the composition root (:mod:`koe.app`) hands it the extra
routes (the voice agent, the page), the paths that need no key, and what to close on shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from koe.errors import KoeError
from koe.logs import log_refusal
from koe.server import deepgram, http
from koe.server.access import HEALTH_PATHS, access_middleware, key_subprotocol
from koe.server.origin import origin_middleware
from koe.server.protocol import parse_query
from koe.server.request_id import RequestIdMiddleware
from koe.server.runtime import Runtime
from koe.server.session import SOCKET_GONE, Session
from koe.server.wyoming import WyomingServer, listen_uri
from koe.wire.errors import WS_INTERNAL_ERROR, error_body, route_of
from koe.wire.messages import Error, encode

logger = logging.getLogger(__name__)

#: Deepgram's path: a WebSocket there (or a POST, :mod:`koe.server.deepgram`) is a Deepgram-style client.
DEEPGRAM_PATH = "/v1/speak"
#: SageMaker's path first; ``/v1/stream`` for koe clients, ``/v1/speak`` for Deepgram-style clients.
STREAM_PATHS = ("/invocations-bidirectional-stream", "/v1/stream", DEEPGRAM_PATH)
#: Query parameters only Deepgram's clients send; koe's say ``format`` and ``voice``.
_DEEPGRAM_QUERY = ("model", "encoding")


async def stream_endpoint(websocket: WebSocket) -> None:
    """Accept, admit and serve one session; refusals and failures end with their close code.

    A Deepgram-style connect (its path, or its ``model``/``encoding`` in the query) with settings koe
    cannot honour is refused at the handshake (HTTP 400, as Deepgram does) rather than told in an ``error``
    and served with the defaults: its clients take any ``error`` as fatal and would hear the wrong audio.
    """
    runtime = http.runtime_of(websocket)
    query = websocket.query_params
    if runtime.ready and (websocket.url.path == DEEPGRAM_PATH or any(p in query for p in _DEEPGRAM_QUERY)):
        refusal = _query_refusal(runtime, query)
        if refusal is not None:
            runtime.metrics.errors.labels(refusal.code).inc()
            log_refusal(logger, f"WebSocket {websocket.url.path} refused", refusal)
            response = JSONResponse(error_body(refusal), status_code=route_of(refusal).http_status)
            await websocket.send_denial_response(response)
            return
    await websocket.accept(subprotocol=key_subprotocol(websocket.scope))
    try:
        with runtime.admitted("ws") as synthesizer:
            await Session(websocket, runtime, synthesizer, websocket.query_params).run()
    except KoeError as exc:  # refused: not ready, shutting down, too many sessions
        runtime.metrics.errors.labels(exc.code).inc()
        log_refusal(logger, f"WebSocket {websocket.url.path} refused", exc)
        retry = getattr(exc, "retry_after_s", None)
        await _close(
            websocket,
            route_of(exc).ws_close or WS_INTERNAL_ERROR,
            encode(Error(exc.code, exc.message, retry)),
        )
    except Exception:
        logger.exception("a session failed")
        runtime.metrics.errors.labels("internal_error").inc()
        await _close(
            websocket, WS_INTERNAL_ERROR, encode(Error("internal_error", "the server failed; see its log"))
        )


def _query_refusal(runtime: Runtime, query: QueryParams) -> KoeError | None:
    """What is wrong with the connect query's settings (voice included), if anything."""
    try:
        options = parse_query(query)
        runtime.synthesizer().voice(
            options.voice or runtime.settings.default_voice, options.speed or 1.0, options.lang
        )
    except KoeError as exc:
        return exc
    return None


async def _close(websocket: WebSocket, code: int, message: str) -> None:
    try:
        await websocket.send_text(message)
        await websocket.close(code)
    except SOCKET_GONE:
        pass  # the client is gone already: nothing left to tell it


def routes() -> list[BaseRoute]:
    return [
        Route("/ping", http.ping, methods=["GET"]),
        Route("/invocations", http.invocations, methods=["POST"]),
        Route("/v1/audio/speech", http.openai_speech, methods=["POST"]),
        Route("/v1/models", http.openai_models, methods=["GET"]),
        Route("/v1/audio/voices", http.openai_voices, methods=["GET"]),
        Route(DEEPGRAM_PATH, deepgram.speak, methods=["POST"]),
        Route("/metrics", http.metrics, methods=["GET"]),
        *(WebSocketRoute(path, stream_endpoint) for path in STREAM_PATHS),
    ]


def create_server_app(
    runtime: Runtime,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    open_paths: Iterable[str] = (),
    on_close: Callable[[], Awaitable[None]] | None = None,
) -> Starlette:
    """The TTS server around ``runtime``.

    Args:
        runtime: settings, metrics, admission and the model (loaded in the background by the lifespan:
            ``/ping`` answers 503 until it is loaded and warmed up, then 200).
        extra_routes: mounted after the TTS routes (the agent, the page).
        open_paths: paths that need no key besides the health checks (the page's static files).
        on_close: awaited on shutdown before the scheduler drains.

    With ``api_key`` set every other route needs the key; with ``cors_origins`` set, pages of those
    origins may call the HTTP routes (:mod:`koe.server.access`). Pages of other sites and foreign Host
    names are refused first (:mod:`koe.server.origin`). With ``wyoming_port`` or ``wyoming_socket`` set,
    the Wyoming server (:mod:`koe.server.wyoming`, ``app.state.wyoming``) runs beside the routes, on the
    same runtime.
    """

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runtime.start()
        wyoming = WyomingServer(runtime) if listen_uri(runtime.settings) is not None else None
        app.state.wyoming = wyoming
        try:
            if wyoming is not None:
                await wyoming.start()
            yield
        finally:
            if on_close is not None:
                await on_close()
            if wyoming is not None:
                await wyoming.aclose()
            await runtime.aclose()

    app = Starlette(
        routes=[*routes(), *extra_routes],
        lifespan=lifespan,
        exception_handlers={KoeError: http.koe_error, Exception: http.internal_error},
        middleware=[
            Middleware(RequestIdMiddleware),  # outermost: refusals carry the id too
            origin_middleware(runtime.settings),
            *access_middleware(runtime.settings, HEALTH_PATHS | frozenset(open_paths)),
        ],
    )
    app.state.runtime = runtime
    return app
