"""The soak's hostile clients: each action is an attack koe must turn away with its documented answer,
after which the connection (where one survives) must still work.

Every action raises ``UpstreamError`` when the server answers otherwise than documented, so a soak counts
it as a client failure. The server's own counters then show the refusals by code, and any
``internal_error`` is a bug. The actions expect the server's slow-client deadlines to be
:data:`SERVER_ENV`'s, shorter than the defaults so that each attack ends within seconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from koe.errors import UpstreamError
from koe.server.session import CLOSE_GRACE_S

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
_SHORT = "Hello there, this is a short answer."
#: Bad messages sent without reading the answers: far more replies than any socket buffer holds.
_FLOOD = 20_000
_SMALL_BUFFER = 4096
#: How a chunked HTTP body ends: a response cut off by the server lacks it.
_LAST_CHUNK = b"0\r\n\r\n"


def _ws(base: str) -> str:
    return base.replace("http", "ws", 1)


def _address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    return parts.hostname or "127.0.0.1", parts.port or 80


async def _error(ws: ClientConnection, code: str) -> None:
    """Read to the next ``error`` message, which must have ``code``."""
    while True:
        frame = await ws.recv()
        if isinstance(frame, str) and (message := json.loads(frame))["type"] == "error":
            if message["code"] != code:
                raise UpstreamError(f"expected error {code}, got {message}")
            return


async def _speaks(ws: ClientConnection) -> None:
    await ws.send(json.dumps({"type": "append", "text": _SHORT}))
    await ws.send(json.dumps({"type": "flush"}))
    heard = 0
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            heard += len(frame)
        elif json.loads(frame)["type"] == "flushed":
            if not heard:
                raise UpstreamError("the session no longer speaks after a refused message")
            return


def _refused(response: httpx.Response, status: int, code: str) -> None:
    body = response.json()
    got = body["error"]["code"] if isinstance(body.get("error"), dict) else body.get("error")
    if (response.status_code, got) != (status, code):
        raise UpstreamError(f"expected {status} {code}, got {response.status_code} {response.text[:200]}")


async def nested_json(base: str, http: httpx.AsyncClient) -> None:
    """30,000 levels of unclosed nesting: invalid_json, and the session speaks on."""
    async with connect(_ws(base) + "/v1/stream") as ws:
        await ws.send('{"type": "config", "x": ' + "[" * 30_000)
        await _error(ws, "invalid_json")
        await _speaks(ws)


async def huge_numbers(base: str, http: httpx.AsyncClient) -> None:
    """400-digit numbers where numbers go, on three routes: invalid_field each time."""
    for path, body in [
        ("/invocations", f'{{"text": "Hi.", "speed": {_HUGE}}}'),
        ("/v1/audio/speech", f'{{"model": "tts-1", "input": "Hi.", "voice": "alloy", "speed": {_HUGE}}}'),
        ("/agent/invocations", f'{{"read": "Hi.", "tokens_per_s": {_HUGE}}}'),
    ]:
        response = await http.post(base + path, content=body, headers={"Content-Type": "application/json"})
        _refused(response, 400, "invalid_field")


async def surrogates(base: str, http: httpx.AsyncClient) -> None:
    """A lone surrogate in an AWS request id: invalid_json; a NUL in the next is echoed back intact."""
    async with connect(_ws(base) + "/invocations-bidirectional-stream") as ws:
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
    _, writer = await _raw_websocket(base)
    bad = _client_frame(0x1, json.dumps({"type": "config", "voice": "zz_nobody"}).encode())
    ends_within = CLOSE_GRACE_S + 3 * _DEADLINE_S + _SLACK_S  # unread replies or idle, then a stalled send
    probe = _client_frame(0x9, b"")  # a ping: answered by the protocol, never seen by the session
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


async def _raw(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = _address(base)
    return await asyncio.open_connection(host, port)


async def _closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """Everything the server sends until it closes; raises if it keeps the socket open past ``timeout_s``."""
    received = b""
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await reader.read(65536):
                received += chunk
    except TimeoutError:
        raise UpstreamError(f"the server kept a stalled socket open past {timeout_s:g} s") from None
    except ConnectionResetError:
        pass
    return received


async def _trickle(writer: asyncio.StreamWriter, data: bytes, pause_s: float) -> None:
    try:
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(pause_s)
    except ConnectionError:
        return  # closed by the server, as it should


async def slowloris(base: str, http: httpx.AsyncClient) -> None:
    """A request head a byte every 0.2 s: closed after the header deadline, without an answer."""
    reader, writer = await _raw(base)
    head = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    sending = asyncio.create_task(_trickle(writer, head, 0.2))
    try:
        answer = await _closed_within(reader, _DEADLINE_S + _SLACK_S)
    finally:
        sending.cancel()
        writer.close()
    if answer:
        raise UpstreamError(f"a slow request head was answered: {answer[:100]!r}")


async def endless_body(base: str, http: httpx.AsyncClient) -> None:
    """A body a few bytes at a time that would take minutes: 408 body_timeout, then the socket closes."""
    reader, writer = await _raw(base)
    writer.write(
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 200000\r\n\r\n"
    )
    sending = asyncio.create_task(_trickle(writer, b"Hello " * 1000, 0.05))
    try:
        answer = await _closed_within(reader, _DEADLINE_S + _SLACK_S)
    finally:
        sending.cancel()
        writer.close()
    if not answer.startswith(b"HTTP/1.1 408") or b"body_timeout" not in answer:
        raise UpstreamError(f"expected 408 body_timeout, got {answer[:200]!r}")


def _upgrade(host_header: str, path: str, extra: str = "") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    ).encode()


async def _raw_websocket(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket on a socket that receives little, by a client that reads nothing after the handshake
    (a client library would keep reading in the background)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SMALL_BUFFER)
    sock.setblocking(False)
    host, port = _address(base)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(_upgrade(f"{host}:{port}", "/v1/stream"))
    status = await reader.readuntil(b"\r\n\r\n")
    if not status.startswith(b"HTTP/1.1 101"):
        raise UpstreamError(f"the WebSocket upgrade failed: {status[:100]!r}")
    return reader, writer


def _client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked frame (a client's frames must be masked) of at most 125 bytes."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


async def ping_flood(base: str, http: httpx.AsyncClient) -> None:
    """5,000 pings from a client that never reads, then it vanishes."""
    _, writer = await _raw_websocket(base)
    writer.write(_client_frame(0x9, b"p" * 125) * 5000)
    await writer.drain()
    await asyncio.sleep(1.0)
    writer.transport.abort()


async def unread_stream(base: str, http: httpx.AsyncClient) -> None:
    """A long streamed response never read: the server drops it after its send deadline (what the socket
    buffers held still arrives, then the connection ends without the response's last chunk)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SMALL_BUFFER)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, _address(base))
    reader, writer = await asyncio.open_connection(sock=sock)
    body = json.dumps({"model": "tts-1", "input": _SHORT * 500, "voice": "alloy", "response_format": "pcm"})
    writer.write(
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    )
    await writer.drain()
    await asyncio.sleep(_DEADLINE_S + _SLACK_S / 2)  # not reading: the server's send stalls
    received = await _closed_within(reader, _SLACK_S)
    writer.close()
    if not received.startswith(b"HTTP/1.1 200") or received.endswith(_LAST_CHUNK):
        raise UpstreamError(f"the stalled response was not dropped ({len(received)} bytes came in full)")


async def foreign_origin(base: str, http: httpx.AsyncClient) -> None:
    """Another site's page opening a WebSocket, and a rebound name: 403 each."""
    host, port = _address(base)
    for request, code in [
        (
            _upgrade(f"{host}:{port}", "/v1/stream", "Origin: https://evil.example.net\r\n"),
            b"forbidden_origin",
        ),
        (_upgrade("evil.example.net", "/agent/ws"), b"forbidden_host"),
    ]:
        reader, writer = await _raw(base)
        writer.write(request)
        answer = await _closed_within(reader, _SLACK_S)
        writer.close()
        if not answer.startswith(b"HTTP/1.1 403") or code not in answer:
            raise UpstreamError(f"expected 403 {code.decode()}, got {answer[:200]!r}")


async def empty_flushes(base: str, http: httpx.AsyncClient) -> None:
    """500 empty turns at once: each answered (flushed, or too_many_turns), then a turn speaks."""
    async with connect(_ws(base) + "/v1/stream") as ws:
        for _ in range(500):
            await ws.send(json.dumps({"type": "flush"}))
        for _ in range(500):
            message = json.loads(await ws.recv())
            refused = message["type"] == "error" and message["code"] == "too_many_turns"
            if message["type"] != "flushed" and not refused:
                raise UpstreamError(f"an empty turn got {message}")
        await _speaks(ws)


async def idle_unflushed(base: str, http: httpx.AsyncClient) -> None:
    """Text that is never flushed, then silence: closed at the idle timeout with 1008 idle_timeout."""
    async with connect(_ws(base) + "/v1/stream") as ws:
        await ws.send(json.dumps({"type": "append", "text": "Spoken at once. And this waits forever for"}))
        try:
            async with asyncio.timeout(_DEADLINE_S + _SLACK_S):
                await _error(ws, "idle_timeout")
                await ws.recv()
        except ConnectionClosed as closed:
            if closed.rcvd is None or closed.rcvd.code != 1008:
                raise UpstreamError(f"expected close 1008 after idle_timeout, got {closed}") from closed
            return
        except TimeoutError:
            raise UpstreamError("an idle session with unflushed text was not closed") from None


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
)
