"""Who may call the server: the optional API key, CORS for pages of other origins, and the exposure warning.

With ``KOE_API_KEY`` set every route needs the key except the open paths (health checks and the browser
page's static files, which hold no data). HTTP clients send ``Authorization: Bearer <key>`` (what the
OpenAI SDK sends with its ``api_key``) or ``Authorization: Token <key>`` (Deepgram's scheme, what its SDK,
pipecat and LiveKit send). WebSocket clients may also send ``X-Api-Key: <key>`` or, from a browser, which
cannot set headers on a WebSocket, ``?api_key=<key>`` or the subprotocol pair ``token, <key>`` (Deepgram's
browser form; the server then answers with the subprotocol ``token``). Keys are compared in constant time.
A refused request gets 401 ``unauthorized``; a refused WebSocket is accepted, told why in an ``error``
message and closed with 1008 and the reason ``unauthorized``, so that every client can tell what happened.
The message says which forms of a key arrived, so a key sent in the wrong place is told from none.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Iterator

from starlette.datastructures import Headers, QueryParams
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from koe.errors import KoeError
from koe.logs import log_refusal
from koe.server.http import koe_error, runtime_of
from koe.server.origin import is_loopback
from koe.settings import Settings
from koe.wire.errors import route_of
from koe.wire.messages import Error, encode

logger = logging.getLogger(__name__)

#: Health checks answer without a key: SageMaker's ``/ping`` and the agent's (AgentCore's) ``/agent/ping``.
HEALTH_PATHS = frozenset({"/ping", "/agent/ping"})
#: The query parameter a browser's WebSocket carries the key in.
QUERY_KEY = "api_key"
#: Headers a page of another origin may send and read (CORS).
_CORS_REQUEST_HEADERS = ("Authorization", "Content-Type", "X-Api-Key")
_CORS_RESPONSE_HEADERS = ("Retry-After", "X-Audio-Duration", "X-Inference-Time-Ms", "X-RTF")


#: ``Authorization`` schemes that carry the key: OpenAI's and Deepgram's.
AUTH_SCHEMES = ("Bearer", "Token")
#: WebSocket subprotocols a browser names before the key (``new WebSocket(url, ["token", key])``).
KEY_SUBPROTOCOLS = ("token", "bearer")


def key_subprotocol(scope: Scope) -> str | None:
    """The subprotocol to answer with when the client sent its key as a subprotocol pair, else ``None``.

    A browser fails the connection unless the server picks one of the subprotocols it offered.
    """
    offered: list[str] = [name.strip() for name in scope.get("subprotocols", ())]
    for name in offered[:-1]:  # the key follows its scheme's name
        if name.lower() in KEY_SUBPROTOCOLS:
            return name
    return None


def _presented_keys(scope: Scope) -> Iterator[tuple[str, bytes]]:
    """Every key the connection offers, with the form it came in (for the refusal's message)."""
    headers = Headers(scope=scope)
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    for name in AUTH_SCHEMES:
        if scheme.lower() == name.lower() and credentials.strip():
            yield f"Authorization: {name}", credentials.strip().encode("latin-1")
    if scope["type"] == "websocket":
        if "x-api-key" in headers:
            yield "X-Api-Key", headers["x-api-key"].strip().encode("latin-1")
        query = QueryParams(scope["query_string"])
        if QUERY_KEY in query:
            yield f"?{QUERY_KEY}=", query[QUERY_KEY].encode("utf-8")
        offered = [name.strip() for name in scope.get("subprotocols", ())]
        for at, name in enumerate(offered[:-1]):
            if name.lower() in KEY_SUBPROTOCOLS:
                yield f"the subprotocol pair '{name}, <key>'", offered[at + 1].encode("latin-1")


def _problem(scope: Scope) -> str:
    """What arrived instead of a valid key, in words."""
    forms = list(dict.fromkeys(form for form, _ in _presented_keys(scope)))
    if forms:
        return f"got a key as {' and '.join(forms)} that does not match"
    scheme = Headers(scope=scope).get("authorization", "").strip().partition(" ")[0]
    if scheme:
        return f"got an Authorization header in the {scheme[:20]!r} scheme, which carries no key koe reads"
    return "got none"


class ApiKeyMiddleware:
    """Refuses every HTTP request and WebSocket without the key, except on ``open_paths`` (HTTP only)."""

    def __init__(self, app: ASGIApp, api_key: str, open_paths: Iterable[str]) -> None:
        self.app = app
        self._key = api_key.encode("ascii")  # Settings guarantees printable ASCII
        self._open = frozenset(open_paths)

    def _authorized(self, scope: Scope) -> bool:
        matched = False
        for _form, key in _presented_keys(scope):  # every offered key is compared: timing reveals nothing
            matched |= hmac.compare_digest(key, self._key)
        return matched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        problem = _problem(scope)
        if scope["type"] == "http":
            message = f"expected the API key as 'Authorization: Bearer <key>' (or 'Token <key>'), {problem}"
            error = KoeError(message, code="unauthorized")
            response = await koe_error(Request(scope, receive), error)
            response.headers["WWW-Authenticate"] = 'Bearer realm="koe"'
            await response(scope, receive, send)
            return
        error = KoeError(
            "expected the API key as 'Authorization: Bearer <key>' (or 'Token <key>'), an 'X-Api-Key' "
            f"header, '?{QUERY_KEY}=<key>' or the subprotocol pair 'token, <key>', {problem}",
            code="unauthorized",
        )
        await _refuse(WebSocket(scope, receive, send), error)


async def _refuse(websocket: WebSocket, error: KoeError) -> None:
    runtime_of(websocket).metrics.errors.labels(error.code).inc()
    log_refusal(logger, f"WebSocket {websocket.url.path} refused", error)
    close_code = route_of(error).ws_close
    assert close_code is not None  # unauthorized always closes (server/errors.py)
    try:
        await websocket.accept(subprotocol=key_subprotocol(websocket.scope))
        await websocket.send_text(encode(Error(error.code, error.message)))
        await websocket.close(close_code, error.code)
    except (WebSocketDisconnect, WebSocketDisconnected):
        pass  # the client is gone already: nothing left to tell it


def access_middleware(settings: Settings, open_paths: Iterable[str]) -> list[Middleware]:
    """CORS outside the key check, so preflights pass and refusals still carry CORS headers."""
    middleware: list[Middleware] = []
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=settings.cors_origins,
                allow_methods=("GET", "POST"),
                allow_headers=_CORS_REQUEST_HEADERS,
                expose_headers=_CORS_RESPONSE_HEADERS,
            )
        )
    if settings.api_key is not None:
        middleware.append(Middleware(ApiKeyMiddleware, api_key=settings.api_key, open_paths=open_paths))
    return middleware


def warn_if_exposed(settings: Settings) -> bool:
    """Warn when anyone on the network could use the server freely; returns whether it warned."""
    if settings.api_key is not None or settings.allow_unauthenticated or is_loopback(settings.host):
        return False
    logger.warning(
        "listening on %s without an API key: anyone who can reach this port may synthesize. Set KOE_API_KEY "
        "(docs/operations.md). Behind SageMaker, which authenticates callers itself, this is expected: set "
        "KOE_ALLOW_UNAUTHENTICATED=true to silence this warning.",
        settings.host,
    )
    return True
