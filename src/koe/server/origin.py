"""Which pages and names may reach the server: the ``Origin`` a browser says a request comes from, and
the ``Host`` it names.

A browser lets any page open a WebSocket to any address, and send simple POSTs (``text/plain``) anywhere:
with no API key (the laptop default) a page of any site could make a local koe speak and spend its CPU.
And a name an attacker controls can be made to resolve to 127.0.0.1 (DNS rebinding), after which the
browser treats the local server as that site, same origin and all. So, before any route runs:

* **Origin.** A WebSocket upgrade or a request that can make the server work (any method but GET, HEAD
  and a CORS preflight's OPTIONS) with an ``Origin`` header — browsers send one on every upgrade and
  cross-origin POST — is refused unless that origin is the server's own (its host and port are the
  request's ``Host``), a loopback one (``http://localhost:<port>``, ``127.0.0.1``, ``[::1]``), or one of
  ``cors_origins`` (``KOE_CORS_ORIGINS``; ``*`` allows any). Clients that are not browsers send no Origin;
  what a foreign page may read is CORS's business (:mod:`koe.server.access`).
* **Host.** When the server listens on a loopback address, ``Host`` must name a loopback address too
  (``localhost``, ``127.0.0.1``, ``[::1]``, any port) or be one of ``allowed_hosts``
  (``KOE_ALLOWED_HOSTS``; ``*`` allows any). Listening elsewhere (a container's 0.0.0.0), the server cannot
  know its names: the check applies only when ``allowed_hosts`` is set.

A refusal is HTTP 403 with ``forbidden_origin`` or ``forbidden_host`` (a JSON body); a WebSocket is refused
before it is accepted, with the same response, so nothing is spoken and the browser sees the status.
"""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from koe.errors import KoeError
from koe.logs import log_refusal
from koe.settings import Settings
from koe.wire.errors import error_body, route_of
from koe.wire.fields import preview

logger = logging.getLogger(__name__)

#: Allows every origin or host.
ANY = "*"
#: Methods a browser lets any page send that make the server do nothing but answer.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(host: str) -> str:
    """The name or address of a ``Host`` value or netloc, without its port, lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 address: [::1]:8080
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") <= 1 else host


def is_loopback(host: str) -> bool:
    """Whether a host name or address (without port) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


class OriginMiddleware:
    """Refuses requests and WebSocket upgrades from foreign origins, and foreign hosts (see the module)."""

    def __init__(
        self, app: ASGIApp, *, origins: tuple[str, ...], hosts: tuple[str, ...], check_host: bool
    ) -> None:
        self.app = app
        self._origins = frozenset(origin.lower().rstrip("/") for origin in origins)
        self._hosts = frozenset(_host_name(host) for host in hosts)
        self._check_host = check_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = self._problem(Headers(scope=scope), scope["type"] == "http" and scope["method"] in _READS)
        if problem is None:
            await self.app(scope, receive, send)
            return
        runtime = getattr(scope["app"].state, "runtime", None)  # the TTS server's; the agent alone has none
        if runtime is not None:
            runtime.metrics.errors.labels(problem.code).inc()
        log_refusal(logger, f"{scope['type']} {scope['path']} refused", problem)
        response = JSONResponse(error_body(problem), status_code=route_of(problem).http_status)
        if scope["type"] == "websocket":
            await WebSocket(scope, receive, send).send_denial_response(response)
        else:
            await response(scope, receive, send)

    def _problem(self, headers: Headers, reads: bool) -> KoeError | None:
        host = headers.get("host", "")
        if self._check_host and ANY not in self._hosts:
            name = _host_name(host)
            if not (is_loopback(name) or name in self._hosts):
                return KoeError(
                    f"expected a Host header naming this server (a loopback address, or one of "
                    f"KOE_ALLOWED_HOSTS), got {preview(host)}",
                    code="forbidden_host",
                )
        origin = headers.get("origin")
        if origin is None or reads or ANY in self._origins or origin.lower().rstrip("/") in self._origins:
            return None
        parts = urlsplit(origin.lower())
        if parts.scheme in ("http", "https") and (
            parts.netloc == host.strip().lower() or is_loopback(_host_name(parts.netloc))
        ):
            return None  # the server's own page, or a page on this machine
        return KoeError(
            f"expected a request from this server's own page, a page on this machine, or an origin in "
            f"KOE_CORS_ORIGINS, got Origin {preview(origin)}",
            code="forbidden_origin",
        )


def origin_middleware(settings: Settings) -> Middleware:
    """The check for ``settings``: its CORS origins, its allowed hosts, and whether it listens on loopback."""
    return Middleware(
        OriginMiddleware,
        origins=settings.cors_origins,
        hosts=settings.allowed_hosts,
        check_host=bool(settings.allowed_hosts) or is_loopback(_host_name(settings.host)),
    )
