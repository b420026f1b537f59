"""koe's HTTP and WebSocket connections: uvicorn's h11 and wsproto protocols, with deadlines and a bound.

* **A request's head** (request line and headers) must arrive within ``header_timeout_s`` of the
  connection opening or of the previous response ending. uvicorn's own keep-alive timer is cancelled by
  every byte that arrives, so a client sending its headers a byte at a time ("slowloris") is held forever
  without this.
* **A write that cannot progress** — the socket's buffer full because the client does not read — for
  ``send_timeout_s`` aborts the connection, so a streamed response or a session's audio never holds its slot
  forever (uvicorn's ``send`` waits for the buffer to drain, without end). The application then sees the
  client disconnect, as after any other.
* **A WebSocket ping** is answered only while the socket's buffer has room: a client that floods pings and
  never reads would otherwise pile pongs up in memory (uvicorn writes each one regardless). RFC 6455 §5.5.3
  lets an endpoint answer only the most recent ping.

A request body's deadline is :func:`koe.wire.body.read_body`'s (an answer, 408, is still possible then).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.wsproto_impl import WSProtocol
from wsproto import events

from koe.settings import Settings

logger = logging.getLogger(__name__)


class _StallDeadline:
    """Aborts the transport when writing has been paused (its buffer over the high-water mark) too long."""

    send_timeout_s: float
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _stall: asyncio.TimerHandle | None = None

    def _writing_paused(self) -> None:
        if self._stall is None:
            self._stall = self.loop.call_later(self.send_timeout_s, self._stalled)

    def _writing_resumed(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _stalled(self) -> None:
        self._stall = None
        if not self.transport.is_closing():
            logger.info("aborting a connection whose client read nothing for %.0f s", self.send_timeout_s)
            self.transport.abort()


class GuardedH11Protocol(_StallDeadline, H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head and on stalled writes."""

    header_timeout_s: float
    _head: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self._writing_resumed()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a complete request head arrived
            self._head_arrived()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._head_arrived()  # the transport passes to the WebSocket protocol
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()  # the next request's head, if the client sends one

    def pause_writing(self) -> None:
        super().pause_writing()
        self._writing_paused()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._writing_resumed()

    def _await_head(self) -> None:
        self._head_arrived()
        self._head = self.loop.call_later(self.header_timeout_s, self._head_late)

    def _head_arrived(self) -> None:
        if self._head is not None:
            self._head.cancel()
            self._head = None

    def _head_late(self) -> None:
        self._head = None
        if not self.transport.is_closing():
            logger.info(
                "closing a connection whose request head did not come in %.0f s", self.header_timeout_s
            )
            self.transport.close()


class GuardedWSProtocol(_StallDeadline, WSProtocol):
    """uvicorn's wsproto protocol (its ``send`` waits while the buffer is full, so a session's water marks
    hold) with a deadline on stalled writes and no pongs while the buffer is full."""

    def connection_lost(self, exc: Exception | None) -> None:
        self._writing_resumed()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._writing_paused()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._writing_resumed()

    def handle_ping(self, event: events.Ping) -> None:
        if self.writable.is_set():
            super().handle_ping(event)


def protocols(settings: Settings) -> tuple[type[GuardedH11Protocol], type[GuardedWSProtocol]]:
    """The HTTP and WebSocket protocol classes for uvicorn, with ``settings``' deadlines."""
    http = type(
        "KoeH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout_s": settings.header_timeout_s, "send_timeout_s": settings.send_timeout_s},
    )
    ws = type("KoeWSProtocol", (GuardedWSProtocol,), {"send_timeout_s": settings.send_timeout_s})
    return http, ws
