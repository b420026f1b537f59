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
* **A WebSocket's input is parsed a slice per turn of the event loop**: one read holds up to 256 KiB,
  thousands of small frames (a flood of pings, of bad messages, of empty fragments) whose parsing and
  answers, in one go, would hold every other connection meanwhile. The rest waits, in order, with reading
  paused, for the loop's next turn.

* **Shutdown** answers a request still receiving its body at once (503 ``shutting_down``, through
  :data:`koe.wire.body.SHUTDOWN_EXTENSION`): uvicorn would wait for the body, which a client trickling it
  need never end, until the grace is over and then fail the request with a 500.

A request body's deadline is :func:`koe.wire.body.read_body`'s (an answer, 408, is still possible then).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.wsproto_impl import WSProtocol
from wsproto import events
from wsproto.connection import ConnectionState

from koe.settings import Settings
from koe.wire.body import SHUTDOWN_EXTENSION

logger = logging.getLogger(__name__)

#: Fragments one WebSocket message may arrive in. Empty continuation frames add no bytes, so the size
#: limit never stops a client sending hundreds of thousands of them; no client library fragments this finely.
MAX_FRAGMENTS_PER_MESSAGE = 1024
#: RFC 6455's close code for a message too big to process.
_CLOSE_TOO_BIG = 1009
#: Bytes of a WebSocket's input parsed per turn of the event loop. The costly input is the smallest frames:
#: 4 KiB holds ~680 empty masked frames, which wsproto parses and uvicorn answers in a few milliseconds; at
#: four times that, a flood of pings held every other connection for tens of milliseconds on a loaded
#: machine (the soak's ``/ping`` probes). A long message only takes more turns, each costing microseconds.
BYTES_PER_TURN = 4 * 1024


class _Timer:
    """One deadline of a connection: armed (again), cancelled, or expired once."""

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, after_s: float, expired: Callable[[], None]) -> None:
        self.cancel()
        self._handle = loop.call_later(after_s, self._expire, expired)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def _expire(self, expired: Callable[[], None]) -> None:
        self._handle = None
        expired()


class _StallDeadline:
    """Aborts the transport when writing has been paused (its buffer over the high-water mark) too long;
    mixed in before uvicorn's protocol, whose flow control it extends."""

    send_timeout_s: float
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._stall = _Timer()
        super().connection_made(transport)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._stall.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if not self._stall.armed:
            self._stall.arm(self.loop, self.send_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]
        self._stall.cancel()

    def _stalled(self) -> None:
        if not self.transport.is_closing():
            logger.info("aborting a connection whose client read nothing for %.0f s", self.send_timeout_s)
            self.transport.abort()


class GuardedH11Protocol(_StallDeadline, H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head and on stalled writes, and a shutdown
    its requests learn of."""

    header_timeout_s: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head = _Timer()
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head.cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a complete request head arrived; its application task has not run yet
            self._head.cancel()
            requested: asyncio.Future[None] = self.loop.create_future()
            self.cycle.scope.setdefault("extensions", {})[SHUTDOWN_EXTENSION] = {"requested": requested}

    def shutdown(self) -> None:
        """Tell a request whose body is still arriving, then let uvicorn finish the connection."""
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not cycle.response_started:
            requested = cycle.scope.get("extensions", {}).get(SHUTDOWN_EXTENSION, {}).get("requested")
            if isinstance(requested, asyncio.Future) and not requested.done():
                requested.set_result(None)
        super().shutdown()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._head.cancel()  # the transport passes to the WebSocket protocol
        super().handle_websocket_upgrade(event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()  # the next request's head, if the client sends one

    def _await_head(self) -> None:
        self._head.arm(self.loop, self.header_timeout_s, self._head_late)

    def _head_late(self) -> None:
        if not self.transport.is_closing():
            logger.info(
                "closing a connection whose request head did not come in %.0f s", self.header_timeout_s
            )
            self.transport.close()


class GuardedWSProtocol(_StallDeadline, WSProtocol):
    """uvicorn's wsproto protocol (its ``send`` waits while the buffer is full, so a session's water marks
    hold) with a deadline on stalled writes, no pongs while the buffer is full, its input parsed a slice
    per turn of the loop, and a close frame for a frame wsproto cannot accept."""

    #: Frames of the message being received so far.
    _fragments = 0
    #: Input received but not yet parsed: it waits for the loop's next turn.
    _backlog = b""

    def data_received(self, data: bytes) -> None:
        if self._backlog:  # earlier input still waits for its turn, and goes first
            self._backlog += data
            self.transport.pause_reading()
            return
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        """Parse a slice of ``data``; the rest waits for the next turn of the loop, with reading paused."""
        super().data_received(data[:BYTES_PER_TURN])
        if len(data) > BYTES_PER_TURN and not self.transport.is_closing():
            self._backlog = data[BYTES_PER_TURN:]
            self.transport.pause_reading()
            self.loop.call_soon(self._parse_backlog)

    def _parse_backlog(self) -> None:
        data, self._backlog = self._backlog, b""
        if self.transport.is_closing():
            return
        self._parse(data)
        if not self._backlog and not self.read_paused:  # uvicorn's own pause, until its queue drains
            self.transport.resume_reading()

    def handle_ping(self, event: events.Ping) -> None:
        if self.writable.is_set():
            super().handle_ping(event)

    def handle_message(self, event: events.TextMessage | events.BytesMessage) -> None:
        """Counts frames, not events: wsproto also hands over the part of a frame each read completes."""
        if event.frame_finished:
            self._fragments += 1
        if event.message_finished:
            self._fragments = 0
        elif self._fragments > MAX_FRAGMENTS_PER_MESSAGE:
            self._close_too_fragmented()
            return
        super().handle_message(event)

    def handle_close(self, event: events.CloseConnection) -> None:
        """A frame wsproto could not accept (invalid UTF-8 in a text message: 1007; a malformed frame: 1002)
        reaches here as a close the client never sent, with the connection still open: uvicorn would drop
        the socket without a word, so the client is told the code first (RFC 6455 §7.1.7)."""
        if not self.close_sent and self.conn.state is ConnectionState.OPEN:
            self.transport.write(self.conn.send(events.CloseConnection(code=event.code, reason=event.reason)))
        super().handle_close(event)

    def _close_too_fragmented(self) -> None:
        """Close 1009 as uvicorn does for a message over its size, and tell the application."""
        if self.close_sent:
            return
        self.close_sent = True
        reason = f"message in more than {MAX_FRAGMENTS_PER_MESSAGE} fragments"
        self.queue.put_nowait({"type": "websocket.disconnect", "code": _CLOSE_TOO_BIG, "reason": reason})
        if not self.transport.is_closing():
            self.transport.write(self.conn.send(events.CloseConnection(code=_CLOSE_TOO_BIG, reason=reason)))
            self.transport.close()


def protocols(settings: Settings) -> tuple[type[GuardedH11Protocol], type[GuardedWSProtocol]]:
    """The HTTP and WebSocket protocol classes for uvicorn, with ``settings``' deadlines."""
    http = type(
        "KoeH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout_s": settings.header_timeout_s, "send_timeout_s": settings.send_timeout_s},
    )
    ws = type("KoeWSProtocol", (GuardedWSProtocol,), {"send_timeout_s": settings.send_timeout_s})
    return http, ws
