"""The raw client the hostile clients need: sockets that receive little, hand-written request heads and
WebSocket frames, what no client library would send.

Each helper raises ``UpstreamError`` when the server answers otherwise than the attack needs to go on.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from urllib.parse import urlsplit

from koe.errors import UpstreamError

#: A receive buffer so small that the server's writes stall at once (the kernel rounds it up a little).
SMALL_BUFFER = 4096
#: RFC 6455's opcodes used here.
TEXT, CONTINUATION, PING = 0x1, 0x0, 0x9
_FIN = 0x80
_RSV1 = 0x40


def ws_url(base: str) -> str:
    return base.replace("http", "ws", 1)


def address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    return parts.hostname or "127.0.0.1", parts.port or 80


async def open_raw(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = address(base)
    return await asyncio.open_connection(host, port)


async def small_socket(base: str) -> socket.socket:
    """A connected non-blocking socket whose receive buffer is :data:`SMALL_BUFFER`."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, address(base))
    return sock


async def closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
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


async def trickle(writer: asyncio.StreamWriter, data: bytes, pause_s: float) -> None:
    """``data`` a byte every ``pause_s``; returns early once the server closes the connection."""
    try:
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(pause_s)
    except ConnectionError:
        return  # closed by the server, as it should


def upgrade(host_header: str, path: str, extra: str = "") -> bytes:
    """A WebSocket upgrade request; ``extra`` holds further header lines, each ending in CR LF."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    ).encode()


async def raw_websocket(
    base: str, path: str = "/v1/stream", extra: str = ""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """A WebSocket on a socket that receives little, by a client that reads nothing after the handshake
    (a client library would keep reading in the background); returns the handshake's answer too."""
    sock = await small_socket(base)
    reader, writer = await asyncio.open_connection(sock=sock)
    host, port = address(base)
    writer.write(upgrade(f"{host}:{port}", path, extra))
    status = await reader.readuntil(b"\r\n\r\n")
    if not status.startswith(b"HTTP/1.1 101"):
        raise UpstreamError(f"the WebSocket upgrade failed: {status[:100]!r}")
    return reader, writer, status


def client_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """One masked frame (a client's frames must be masked) of at most 125 bytes."""
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    first = (_FIN if fin else 0) | (_RSV1 if rsv1 else 0) | opcode
    return bytes([first, 0x80 | len(payload)]) + mask + masked


def close_code(received: bytes) -> int | None:
    """The code of the first close frame (server frames are unmasked) in ``received``, if one came."""
    at = 0
    while at + 2 <= len(received):
        opcode, length = received[at] & 0x0F, received[at + 1] & 0x7F
        head = 2 + {126: 2, 127: 8}.get(length, 0)
        if length >= 126:
            length = int.from_bytes(received[at + 2 : at + head], "big")
        if opcode == 0x8:
            payload = received[at + head : at + head + length]
            return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
        at += head + length
    return None
