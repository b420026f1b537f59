"""An ``x-request-id`` on every response of the ``/v1/`` routes, errors included.

OpenAI-style clients log it (LiveKit's plugins warn on every response without one), and Deepgram's
``dg-request-id`` repeats it. A client's own ``x-request-id`` is echoed when it is short, printable ASCII
(:func:`~koe.wire.fields.header_safe`), so that its logs and koe's name the same request; otherwise koe
makes one.
"""

from __future__ import annotations

import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from koe.wire.fields import header_safe

HEADER = "x-request-id"
#: Routes whose responses carry the header.
PREFIX = "/v1/"
#: The longest client's id echoed (a uuid is 36 characters).
MAX_ECHOED_CHARS = 128


def request_id_of(connection: HTTPConnection) -> str:
    """The id the middleware gave this request (a fresh one outside the ``/v1/`` routes)."""
    return str(connection.scope.get("state", {}).get("request_id") or uuid.uuid4().hex)


class RequestIdMiddleware:
    """Gives each ``/v1/`` HTTP request an id (in ``scope["state"]``) and its response the header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        offered = Headers(scope=scope).get(HEADER, "")
        request_id = offered if header_safe(offered, MAX_ECHOED_CHARS) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = request_id
            await send(message)

        await self.app(scope, receive, send_with_id)
