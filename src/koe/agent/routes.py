"""The agent's endpoints, on Bedrock AgentCore Runtime's container contract, and the browser page.

* ``GET /ping`` — ``{"status": "Healthy"}`` once the TTS can speak (503 before).
* ``POST /invocations`` — ``{"prompt"|"read", "session_id"?, "voice"?, "speed"?}`` answered as
  Server-Sent Events (:mod:`koe.agent.events`); a client that disconnects interrupts its turn.
* ``WS /ws`` — the browser's session: JSON requests in, JSON events and binary PCM16 frames out.
* ``GET /info`` — what the page needs: the LLM in use (or how to enable one), voices (also grouped by
  language), sample rate.

``koe serve`` mounts these under ``/agent`` beside the TTS routes and serves the page at ``/``
(:mod:`koe.app`); ``koe agent`` serves them at the root as well, as AgentCore expects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import ExitStack, asynccontextmanager
from typing import Any, cast

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from koe.agent.base import LLMSource
from koe.agent.config import HOW_TO_ENABLE
from koe.agent.events import AgentEvent, SessionOpened, TurnError, to_frames, to_sse
from koe.agent.pipeline import AgentSession, AgentTurn
from koe.agent.protocol import Ask, Interrupt, TurnRequest, parse_invocation, parse_message
from koe.agent.protocol import session_id as session_id_of
from koe.agent.replay import ReplaySource
from koe.agent.service import VoiceAgent
from koe.errors import KoeError, LimitError, OverloadedError
from koe.languages import DEFAULT, LANGUAGES, of_voice
from koe.logs import log_refusal
from koe.types import SAMPLE_RATE
from koe.web import page
from koe.wire.body import read_body
from koe.wire.errors import (
    WS_POLICY_VIOLATION,
    WS_TRY_AGAIN_LATER,
    error_body,
    response_headers,
    route_of,
)
from koe.wire.streaming import HeldStreamingResponse

logger = logging.getLogger(__name__)

#: AgentCore passes the conversation's id in this header.
AGENTCORE_SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
_HEADER_NAME = f"the {AGENTCORE_SESSION_HEADER} header"
#: Browser sessions at once; more are refused with 1013.
MAX_SOCKETS = 64
#: A socket with no message and no turn for this long is closed (1008).
IDLE_TIMEOUT_S = 600.0
#: The subprotocol a browser offers beside ``base64UrlBearerAuthorization.<token>`` to send AgentCore
#: Runtime its JWT (docs/deploy.md).
BEARER_SUBPROTOCOL = "base64UrlBearerAuthorization"


def _body_limit(agent: VoiceAgent) -> int:
    """The largest request accepted: the longest prompt in the worst UTF-8 case, plus the other fields."""
    return agent.options.max_prompt_chars * 4 + 1024


def voice_groups(voices: list[str]) -> list[dict[str, Any]]:
    """The voices by language, in koe's order of languages: ``[{lang, language, voices}]``."""
    groups: dict[str, list[str]] = {}
    for name in voices:
        groups.setdefault((of_voice(name) or DEFAULT).code, []).append(name)
    return [
        {"lang": lang.code, "language": lang.name, "voices": groups[lang.code]}
        for lang in LANGUAGES
        if lang.code in groups
    ]


class AgentEndpoints:
    """The request handlers, bound to one :class:`VoiceAgent`."""

    def __init__(self, agent: VoiceAgent) -> None:
        self.agent = agent
        self._sockets = 0
        self._closing: set[asyncio.Task[None]] = set()  # session clean-ups outliving their request

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/ping", self.ping, methods=["GET"]),
            Route("/info", self.info, methods=["GET"]),
            Route("/invocations", self.invocations, methods=["POST"]),
            WebSocketRoute("/ws", self.socket),
        ]

    async def ping(self, request: Request) -> Response:
        if self.agent.speaker.ready:
            return JSONResponse({"status": "Healthy"})
        return JSONResponse({"status": "Unhealthy", "message": "the TTS is not ready"}, status_code=503)

    def describe(self) -> dict[str, Any]:
        """What the page needs: the LLM in use (or how to enable one), the voices, the sample rate."""
        config = self.agent.llm_config
        return {
            "llm": config.describe(),
            "llm_available": config.kind != "none",
            "how_to_enable": HOW_TO_ENABLE if config.kind == "none" else None,
            "voices": self.agent.speaker.voices(),
            "voice_groups": voice_groups(self.agent.speaker.voices()),
            "default_voice": self.agent.options.default_voice,
            "sample_rate": SAMPLE_RATE,
        }

    async def info(self, request: Request) -> Response:
        return JSONResponse(self.describe())

    async def invocations(self, request: Request) -> Response:
        """Start a turn and stream its events; errors before the turn are JSON with their HTTP status."""
        limit = _body_limit(self.agent)
        body = await read_body(request, limit)
        turn_request, session_id = parse_invocation(
            body, request.headers.get("content-type"), max_bytes=limit
        )
        session_id = session_id or session_id_of(request.headers.get(AGENTCORE_SESSION_HEADER), _HEADER_NAME)
        named = session_id is not None
        held = ExitStack()
        held.enter_context(self.agent.speaker.admitted("http"))  # refused: 503 before anything is sent
        try:
            session = await self.agent.named_session(session_id) if session_id else self.agent.open_session()
            turn = await self._start(session, turn_request)
        except BaseException:
            held.close()
            raise
        if not named:
            held.callback(lambda: self._close_later(session.aclose()))

        async def stream() -> AsyncIterator[str]:
            async for event in session.events(turn):
                yield to_sse(event)

        return HeldStreamingResponse(
            stream(), held.close, "text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    async def socket(self, websocket: WebSocket) -> None:
        """One browser session: a reader here, one forwarding task per turn (each after the previous)."""
        # A browser that offered subprotocols drops a socket that selects none; AgentCore's JWT route has
        # the browser offer its sentinel (the token rides beside it), so that one is selected.
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol=BEARER_SUBPROTOCOL if BEARER_SUBPROTOCOL in offered else None)
        try:
            if self._sockets >= MAX_SOCKETS:
                raise OverloadedError(
                    f"all {MAX_SOCKETS} agent sessions are in use; retry later", code="too_many_sessions"
                )
            with self.agent.speaker.admitted("ws"):  # a session of the TTS server, within its limit
                self._sockets += 1
                try:
                    await self._serve(websocket)
                finally:
                    self._sockets -= 1
        except OverloadedError as exc:
            await _refuse(websocket, exc, route_of(exc).ws_close or WS_TRY_AGAIN_LATER)

    async def _serve(self, websocket: WebSocket) -> None:
        """The accepted, admitted browser session until it leaves or idles out."""
        session = self.agent.open_session()
        lock = asyncio.Lock()
        forwarder: asyncio.Task[None] | None = None

        async def send(event: AgentEvent) -> None:
            async with lock:  # a turn's forwarder and the reader both send; frames of one event stay together
                for frame in to_frames(event):
                    if isinstance(frame, str):
                        await websocket.send_text(frame)
                    else:
                        await websocket.send_bytes(frame)

        async def forward(turn_events: AsyncIterator[AgentEvent], after: asyncio.Task[None] | None) -> None:
            if after is not None:
                await asyncio.wait([after])
            try:
                async for event in turn_events:
                    await send(event)
            except (WebSocketDisconnect, WebSocketDisconnected):
                return  # the reader sees the disconnect too and ends the session

        try:
            await send(SessionOpened(session.id, self.describe()))
            while True:
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT_S):
                        message = await websocket.receive()
                except TimeoutError:
                    if forwarder is not None and not forwarder.done():
                        continue
                    await _refuse(
                        websocket,
                        LimitError(f"no message for {IDLE_TIMEOUT_S:g} s", code="idle_timeout"),
                        WS_POLICY_VIOLATION,
                    )
                    return
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("text") if message.get("text") is not None else message.get("bytes")
                try:
                    request = parse_message(data or b"", max_bytes=_body_limit(self.agent))
                    if isinstance(request, Interrupt):
                        interrupted = await session.interrupt(request.heard_segments)
                        if forwarder is not None:
                            await asyncio.wait([forwarder])  # its ``done`` goes out before the answer
                        if interrupted is not None:
                            await send(interrupted)
                        continue
                    turn = await self._start(session, request)
                    forwarder = asyncio.create_task(forward(session.events(turn), forwarder))
                except KoeError as exc:
                    await send(TurnError(None, exc.code, exc.message))
        except (WebSocketDisconnect, WebSocketDisconnected):
            logger.info("agent session %s: the browser left", session.id)
        finally:
            if forwarder is not None:
                forwarder.cancel()
            self._close_later(session.aclose())

    async def _start(self, session: AgentSession, request: TurnRequest) -> AgentTurn:
        source: LLMSource
        if isinstance(request, Ask):
            source, text = await self.agent.llm(), request.prompt
        else:
            source, text = ReplaySource(request.text, request.pace), request.text
        return await session.start(text, source, voice=request.voice, speed=request.speed, lang=request.lang)

    def _close_later(self, closing: Awaitable[None]) -> None:
        """Finish a session's clean-up in its own task: the request's task may be cancelled already."""

        async def run() -> None:
            await closing

        task = asyncio.get_running_loop().create_task(run())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Wait for pending session clean-ups, then close the agent; idempotent."""
        if self._closing:
            await asyncio.wait(set(self._closing))
        await self.agent.aclose()


async def _refuse(websocket: WebSocket, error: KoeError, code: int) -> None:
    try:
        for frame in to_frames(TurnError(None, error.code, error.message)):
            await websocket.send_text(str(frame))
        await websocket.close(code)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass  # already gone: nothing left to tell it


def create_agent_app(agent: VoiceAgent, middleware: Sequence[Middleware] = ()) -> Starlette:
    """``koe agent``: the agent alone (TTS remote), on AgentCore's paths and under ``/agent`` for the page;
    ``middleware`` wraps it (the CLI's origin check)."""
    endpoints = AgentEndpoints(agent)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await endpoints.aclose()

    return Starlette(
        routes=[*endpoints.routes(), Mount("/agent", routes=endpoints.routes()), *page()],
        lifespan=lifespan,
        exception_handlers={KoeError: _error_response, Exception: _internal_error},
        middleware=list(middleware),
    )


async def _error_response(request: Request, exc: Exception) -> Response:
    """A ``KoeError`` from an agent route as koe's JSON error (``koe serve`` uses the server's handler)."""
    error = cast(KoeError, exc)
    log_refusal(logger, f"{request.method} {request.url.path} refused", error)
    status = route_of(error).http_status
    return JSONResponse(error_body(error), status_code=status, headers=response_headers(error))


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: a JSON 500 without internals (uvicorn logs the traceback)."""
    body = {"error": "internal_error", "message": "the agent failed; see its log"}
    return JSONResponse(body, status_code=500)
