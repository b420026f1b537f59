"""Reading an HTTP request's body within a size limit and a deadline, and checking its media type, for
every HTTP route of every transport.

A client that sends its body slowly, or never ends it (a chunked body without its last chunk), holds a
socket and a request slot for nothing: the whole body must arrive within ``timeout_s`` of the handler
asking for it. A client that leaves mid-body is ``client_disconnected``, not a server failure. A server
shutting down does not wait for a body still arriving: koe's HTTP protocol
(:mod:`koe.server.connections`) resolves the request's :data:`SHUTDOWN_EXTENSION` future, and the request is
answered ``shutting_down`` at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from starlette.requests import ClientDisconnect, Request

from koe.errors import ConfigError, LimitError, OverloadedError
from koe.wire.fields import preview

#: How long a body may take to arrive when the caller sets no deadline of its own.
BODY_TIMEOUT_S = 30.0
JSON_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain"
#: The ASGI scope extension (``scope["extensions"]``) whose ``"requested"`` future the server resolves when
#: it shuts the request's connection down.
SHUTDOWN_EXTENSION = "koe.shutdown"
#: A declared length with more digits than this is over any limit (and is not converted to an int).
_MAX_DIGITS = 18


async def read_body(request: Request, limit: int, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The whole body, refused as soon as it passes ``limit`` bytes (never buffered beyond it).

    Raises:
        OverloadedError: the server shut the connection down before the body ended (``shutting_down``).
        LimitError: over ``limit`` (``body_too_large``), not complete within ``timeout_s``
            (``body_timeout``), or the client left first (``client_disconnected``).
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > _MAX_DIGITS or int(declared) > limit):
        raise LimitError(
            f"body of {declared[:_MAX_DIGITS]} bytes is over the limit of {limit}", code="body_too_large"
        )
    body = bytearray()
    shutdown = _shutdown_of(request)
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            with _expiring_on(shutdown, deadline):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > limit:
                        raise LimitError(f"body is over the limit of {limit} bytes", code="body_too_large")
    except TimeoutError:
        if shutdown is not None and shutdown.done():
            raise OverloadedError("the server is shutting down", code="shutting_down") from None
        raise LimitError(
            f"the body did not arrive within {timeout_s:g} s ({len(body)} bytes came)", code="body_timeout"
        ) from None
    except ClientDisconnect:
        raise LimitError(
            "the client disconnected before sending its whole body", code="client_disconnected"
        ) from None
    return bytes(body)


def _shutdown_of(request: Request) -> asyncio.Future[None] | None:
    """The future the server resolves on shutdown; None under a server that offers none (tests' ASGI)."""
    extension = request.scope.get("extensions", {}).get(SHUTDOWN_EXTENSION, {})
    requested = extension.get("requested")
    return requested if isinstance(requested, asyncio.Future) else None


@contextmanager
def _expiring_on(shutdown: asyncio.Future[None] | None, deadline: asyncio.Timeout) -> Iterator[None]:
    """While inside, ``deadline`` expires at once when ``shutdown`` resolves (or has resolved already)."""
    if shutdown is None:
        yield
        return
    inside = True

    def expire(_: asyncio.Future[None]) -> None:
        if inside:  # the callback runs on a later turn of the loop, perhaps after the block ended
            deadline.reschedule(asyncio.get_running_loop().time())

    shutdown.add_done_callback(expire)
    try:
        yield
    finally:
        inside = False
        shutdown.remove_done_callback(expire)


def body_media_type(content_type: str | None, accepted: Collection[str] = (JSON_MEDIA_TYPE,)) -> str:
    """The body's media type (``Content-Type`` without its parameters, lower case), one of ``accepted``.
    A body without a ``Content-Type`` is taken for JSON: clients that send JSON often leave it out.

    Raises:
        ConfigError: another media type (``unsupported_media_type``, 415).
    """
    media = (content_type or JSON_MEDIA_TYPE).split(";")[0].strip().lower()
    if media not in accepted:
        raise ConfigError(
            f"expected {' or '.join(accepted)}, got {preview(content_type)}", code="unsupported_media_type"
        )
    return media
