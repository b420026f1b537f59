"""``create_app``: the Starlette app with every route, its lifespan, and the WebSocket endpoint."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from koe.agent.routes import WEB_DIR, mount_agent
from koe.errors import KoeError
from koe.server import http
from koe.server.access import HEALTH_PATHS, access_middleware, static_paths
from koe.server.errors import WS_INTERNAL_ERROR, route_of
from koe.server.protocol import Error, encode
from koe.server.runtime import Runtime
from koe.server.session import SOCKET_GONE, Session
from koe.settings import Settings
from koe.speech import Speech

logger = logging.getLogger(__name__)

#: SageMaker's path first; ``/v1/stream`` for koe clients, ``/v1/speak`` for Deepgram-style clients.
STREAM_PATHS = ("/invocations-bidirectional-stream", "/v1/stream", "/v1/speak")


async def stream_endpoint(websocket: WebSocket) -> None:
    """Accept, admit and serve one session; refusals and failures end with their close code."""
    runtime = http.runtime_of(websocket)
    await websocket.accept()
    try:
        with runtime.admitted("ws") as loaded:
            await Session(websocket, runtime, loaded, websocket.query_params).run()
    except KoeError as exc:  # refused: not ready, shutting down, too many sessions
        runtime.metrics.errors.labels(exc.code).inc()
        logger.info("WebSocket %s refused: %s: %s", websocket.url.path, exc.code, exc.message)
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
        Route("/metrics", http.metrics, methods=["GET"]),
        *(WebSocketRoute(path, stream_endpoint) for path in STREAM_PATHS),
    ]


def create_app(settings: Settings | None = None, speech: Speech | None = None) -> Starlette:
    """The koe ASGI app.

    Args:
        settings: limits and options (default: from ``KOE_*`` environment variables).
        speech: an already loaded model to share (tests, the agent); loaded in the background if absent.

    The model loads after the server starts listening: ``/ping`` answers 503 until it is loaded and
    warmed up, then 200. On shutdown the scheduler refuses new work and drains for a bounded time.
    With ``api_key`` set, every route but the health checks and the page's files needs the key; with
    ``cors_origins`` set, pages of those origins may call the HTTP routes (``koe.server.access``).
    """
    runtime = Runtime(settings or Settings.from_env(), speech)
    agent = mount_agent(runtime)  # the voice agent under /agent and the page at / (docs/agent.md)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runtime.start()
        try:
            yield
        finally:
            await agent.aclose()
            await runtime.aclose()

    app = Starlette(
        routes=[*routes(), *agent.routes],
        lifespan=lifespan,
        exception_handlers={KoeError: http.koe_error, Exception: http.internal_error},
        middleware=access_middleware(runtime.settings, HEALTH_PATHS | static_paths(WEB_DIR)),
    )
    app.state.runtime = runtime
    return app
