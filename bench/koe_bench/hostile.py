"""The soak's hostile clients: each action is an attack koe must turn away with its documented answer,
after which the connection (where one survives) must still work.

Every action raises ``UpstreamError`` when the server answers otherwise than documented, so a soak counts
it as a client failure. The server's own counters then show the refusals by code, and any
``internal_error`` is a bug. The actions expect the server's slow-client deadlines to be
:data:`SERVER_ENV`'s, shorter than the defaults so that each attack ends within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from koe.errors import UpstreamError
from koe.server.session import CLOSE_GRACE_S
from koe_bench.hostile_checks import SPOKEN, expect_refusal, speaks
from koe_bench.hostile_inputs import INPUT_ACTIONS
from koe_bench.rawclient import (
    PING,
    TEXT,
    address,
    client_frame,
    closed_within,
    open_raw,
    raw_websocket,
    small_socket,
    trickle,
    upgrade,
    ws_url,
)

#: The deadlines the hostile actions are paced for (seconds), set on the soaked server's environment.
SERVER_ENV = {
    "KOE_HEADER_TIMEOUT_S": "5",
    "KOE_BODY_TIMEOUT_S": "5",
    "KOE_SEND_TIMEOUT_S": "5",
    "KOE_IDLE_TIMEOUT_S": "5",
}
_DEADLINE_S = 5.0
#: How much longer than a deadline the server may take to act on it before it counts as not acting.
_SLACK_S = 10.0
_HUGE = "9" * 400
#: Bad messages sent without reading the answers: far more replies than any socket buffer holds.
_FLOOD = 20_000
#: The unread response at the highest rate and the slowest speed, so that its bytes fill the socket
#: buffers soonest (each second of synthesis gives twice the audio at speed 0.5).
_UNREAD_RATE = 48_000
_UNREAD_SPEED = 0.5
#: How long an unread response may hold its connection: the buffers (about 3 MB on loopback, 30 s of audio
#: at 48 kHz) filled while other clients share the workers (a soak's 3 clients and 2 attackers on 2 cores
#: leave this stream a fraction of one), then the send deadline.
_UNREAD_WITHIN_S = 150.0
#: The actions that take longer than a soak's usual per-action limit by design, with their own limit.
LONG_ACTIONS: dict[str, float] = {"unread_stream": _UNREAD_WITHIN_S + _SLACK_S}
_PROBE_EVERY_S = 0.5


async def _error(ws: ClientConnection, code: str) -> None:
    """Read to the next ``error`` message, which must have ``code``."""
    while True:
        frame = await ws.recv()
        if isinstance(frame, str) and (message := json.loads(frame))["type"] == "error":
            if message["code"] != code:
                raise UpstreamError(f"expected error {code}, got {message}")
            return


async def nested_json(base: str, http: httpx.AsyncClient) -> None:
    """30,000 levels of unclosed nesting: invalid_json, and the session speaks on."""
    async with connect(ws_url(base) + "/v1/stream") as ws:
        await ws.send('{"type": "config", "x": ' + "[" * 30_000)
        await _error(ws, "invalid_json")
        await speaks(ws)


async def huge_numbers(base: str, http: httpx.AsyncClient) -> None:
    """400-digit numbers where numbers go, on three routes: invalid_field each time."""
    for path, body in [
        ("/invocations", f'{{"text": "Hi.", "speed": {_HUGE}}}'),
        ("/v1/audio/speech", f'{{"model": "tts-1", "input": "Hi.", "voice": "alloy", "speed": {_HUGE}}}'),
        ("/agent/invocations", f'{{"read": "Hi.", "tokens_per_s": {_HUGE}}}'),
    ]:
        response = await http.post(base + path, content=body, headers={"Content-Type": "application/json"})
        expect_refusal(response, 400, "invalid_field")


async def surrogates(base: str, http: httpx.AsyncClient) -> None:
    """A lone surrogate in an AWS request id: invalid_json; a NUL in the next is echoed back intact."""
    async with connect(ws_url(base) + "/invocations-bidirectional-stream") as ws:
        await ws.send('{"text": "Hi.", "request_id": "\\ud800"}')
        await _error(ws, "invalid_json")
        await ws.send('{"text": "Hello there.", "request_id": "ok\\u0000"}')
        while True:
            frame = await ws.recv()
            if isinstance(frame, str) and json.loads(frame)["type"] == "synthesis_complete":
                if json.loads(frame)["request_id"] != "ok\x00":
                    raise UpstreamError(f"the request id came back changed: {frame}")
                return


async def error_flood(base: str, http: httpx.AsyncClient) -> None:
    """Thousands of bad messages from a client that reads none of the errors: the server ends the session
    (replies_unread once its backlog of unread replies is full, or its idle timeout if the socket buffers,
    megabytes deep on loopback, held every reply) and drops the connection. The client never reads: it
    finds out when a write of its own is refused."""
    _, writer, _ = await raw_websocket(base)
    bad = client_frame(TEXT, json.dumps({"type": "config", "voice": "zz_nobody"}).encode())
    ends_within = CLOSE_GRACE_S + 3 * _DEADLINE_S + _SLACK_S  # unread replies or idle, then a stalled send
    probe = client_frame(PING, b"")  # a ping: answered by the protocol, never seen by the session
    try:
        writer.write(bad * _FLOOD)
        async with asyncio.timeout(ends_within):
            while True:
                with contextlib.suppress(TimeoutError):  # the server not reading: our buffer is full
                    await asyncio.wait_for(writer.drain(), 1.0)
                await asyncio.sleep(0.5)
                writer.write(probe)
    except ConnectionError:
        return  # the server dropped the connection: what it should do
    except TimeoutError:
        raise UpstreamError(f"a flooding session was not closed within {ends_within:g} s") from None
    finally:
        writer.transport.abort()


async def slowloris(base: str, http: httpx.AsyncClient) -> None:
    """A request head a byte every 0.2 s: closed after the header deadline, without an answer."""
    reader, writer = await open_raw(base)
    head = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    sending = asyncio.create_task(trickle(writer, head, 0.2))
    try:
        answer = await closed_within(reader, _DEADLINE_S + _SLACK_S)
    finally:
        sending.cancel()
        writer.close()
    if answer:
        raise UpstreamError(f"a slow request head was answered: {answer[:100]!r}")


async def endless_body(base: str, http: httpx.AsyncClient) -> None:
    """A body a few bytes at a time that would take minutes: 408 body_timeout, then the socket closes."""
    reader, writer = await open_raw(base)
    writer.write(
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 200000\r\n\r\n"
    )
    sending = asyncio.create_task(trickle(writer, b"Hello " * 1000, 0.05))
    try:
        answer = await closed_within(reader, _DEADLINE_S + _SLACK_S)
    finally:
        sending.cancel()
        writer.close()
    if not answer.startswith(b"HTTP/1.1 408") or b"body_timeout" not in answer:
        raise UpstreamError(f"expected 408 body_timeout, got {answer[:200]!r}")


async def ping_flood(base: str, http: httpx.AsyncClient) -> None:
    """5,000 pings from a client that never reads, then it vanishes."""
    _, writer, _ = await raw_websocket(base)
    writer.write(client_frame(PING, b"p" * 125) * 5000)
    await writer.drain()
    await asyncio.sleep(1.0)
    writer.transport.abort()


async def unread_stream(base: str, http: httpx.AsyncClient) -> None:
    """A long streamed response never read: the server drops it once its writes have stalled for its send
    deadline. Reading would let the stalled writes go on (the loopback buffers hold megabytes, a minute of
    audio the model may not have made yet), so the client learns of the drop without reading: a byte it
    sends to a connection the server has closed is answered with a reset. The response (20 minutes of
    audio) cannot have ended by then."""
    sock = await small_socket(base)
    loop = asyncio.get_running_loop()
    request = {"text": SPOKEN * 500, "format": "pcm", "sample_rate": _UNREAD_RATE, "speed": _UNREAD_SPEED}
    body = json.dumps(request)
    await loop.sock_sendall(
        sock,
        f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}".encode(),
    )
    try:
        async with asyncio.timeout(_UNREAD_WITHIN_S):
            while True:
                await asyncio.sleep(_PROBE_EVERY_S)
                # an empty line: what HTTP/1.1 lets precede the next request, so an open connection ignores it
                sock.send(b"\r\n")
    except ConnectionError:
        return  # reset: the server dropped the unread response, as it should
    except TimeoutError:
        raise UpstreamError(f"an unread response was not dropped within {_UNREAD_WITHIN_S:g} s") from None
    finally:
        sock.close()


async def foreign_origin(base: str, http: httpx.AsyncClient) -> None:
    """Another site's page opening a WebSocket, and a rebound name: 403 each."""
    host, port = address(base)
    for request, code in [
        (
            upgrade(f"{host}:{port}", "/v1/stream", "Origin: https://evil.example.net\r\n"),
            b"forbidden_origin",
        ),
        (upgrade("evil.example.net", "/agent/ws"), b"forbidden_host"),
    ]:
        reader, writer = await open_raw(base)
        writer.write(request)
        answer = await closed_within(reader, _SLACK_S)
        writer.close()
        if not answer.startswith(b"HTTP/1.1 403") or code not in answer:
            raise UpstreamError(f"expected 403 {code.decode()}, got {answer[:200]!r}")


async def empty_flushes(base: str, http: httpx.AsyncClient) -> None:
    """500 empty turns at once: each answered (flushed, or too_many_turns), then a turn speaks."""
    async with connect(ws_url(base) + "/v1/stream") as ws:
        for _ in range(500):
            await ws.send(json.dumps({"type": "flush"}))
        for _ in range(500):
            message = json.loads(await ws.recv())
            refused = message["type"] == "error" and message["code"] == "too_many_turns"
            if message["type"] != "flushed" and not refused:
                raise UpstreamError(f"an empty turn got {message}")
        await speaks(ws)


async def idle_unflushed(base: str, http: httpx.AsyncClient) -> None:
    """Text that is never flushed, then silence: closed 1008 idle_timeout once the audio of what was
    complete has been heard. That audio keeps the session busy for as long as it waits for a worker, so the
    idle deadline counts from its last frame, not from the message."""
    async with connect(ws_url(base) + "/v1/stream") as ws:
        await ws.send(json.dumps({"type": "append", "text": "Spoken at once. And this waits forever for"}))
        loop = asyncio.get_running_loop()
        sent = heard = loop.time()
        # the server checks for idleness every idle timeout: closing takes up to two after the last frame
        closes_within = 2 * _DEADLINE_S + _SLACK_S
        try:
            while True:
                async with asyncio.timeout_at(heard + closes_within):
                    frame = await ws.recv()
                if isinstance(frame, bytes):
                    heard = loop.time()
                elif (message := json.loads(frame))["type"] == "error" and message["code"] != "idle_timeout":
                    raise UpstreamError(f"expected idle_timeout, got {message}")
        except ConnectionClosed as closed:
            if closed.rcvd is None or closed.rcvd.code != 1008:
                raise UpstreamError(f"expected close 1008 after idle_timeout, got {closed}") from closed
        except TimeoutError:
            raise UpstreamError(
                f"an idle session with unflushed text was open {loop.time() - heard:.1f} s after its last "
                f"audio ({heard - sent:.1f} s after the message)"
            ) from None


#: One client action of a soak: the server's base URL and a shared HTTP client in, raises on failure.
Action = Callable[[str, httpx.AsyncClient], Awaitable[None]]
HOSTILE_ACTIONS: tuple[Action, ...] = (
    nested_json,
    huge_numbers,
    surrogates,
    error_flood,
    slowloris,
    endless_body,
    ping_flood,
    unread_stream,
    foreign_origin,
    empty_flushes,
    idle_unflushed,
    *INPUT_ACTIONS,
)
