"""Floods from one client — bad messages it never reads the answers to, empty turns, pings — stay bounded,
and every session the server admits counts against its limits, the agent's included."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import threading
from collections import defaultdict
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from koe.server import connections, session
from koe.server.connections import BYTES_PER_TURN, MAX_FRAGMENTS_PER_MESSAGE, GuardedWSProtocol
from live_checks import assert_serving, close_code, metric, wait_for
from live_server import LOOPBACK, LiveServer, ServerFactory, loopback_socket
from support.fake import FakeEngine
from ws_events import Event, messages, of_type, receive, run, send, until

#: More replies than any socket buffer between the two ends holds (each is ~150 bytes).
FLOOD = 3000
#: Small buffers at both ends, so a client that does not read backs up into the server within kilobytes.
SMALL_BUFFER = 4096
#: The wait for a client to take its closing error (koe.server.session's, shortened): what is tested is that
#: the session ends, not when.
CLOSE_GRACE_S = 0.5


def small_socket(live: LiveServer) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)  # the flood itself goes out freely
    sock.connect((LOOPBACK, live.port))
    return sock


def open_raw(live: LiveServer) -> socket.socket:
    """A WebSocket whose client reads nothing after the handshake (a library would read in the
    background; this one does not)."""
    sock = small_socket(live)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /v1/stream HTTP/1.1\r\nHost: {LOOPBACK}:{live.port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    assert sock.recv(4096).startswith(b"HTTP/1.1 101")
    return sock


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked frame (every client frame is masked), of at most 125 bytes."""
    mask = os.urandom(4)
    return (
        bytes([0x80 | opcode, 0x80 | len(payload)])
        + mask
        + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    )


def test_a_client_flooding_errors_it_never_reads_is_closed_with_a_bounded_backlog(
    serve_fake: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "CLOSE_GRACE_S", CLOSE_GRACE_S)
    bad = client_frame(0x1, json.dumps({"type": "config", "voice": "zz_nobody"}).encode())
    with serve_fake(sock=loopback_socket(send_buffer=SMALL_BUFFER)) as live:
        sock = open_raw(live)
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 1, "the session to open")
        try:
            sock.sendall(bad * FLOOD)
        except OSError:
            pass  # the server closed the session before it took the whole flood: what is tested
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 0, "the session to be closed")
        assert metric(live, 'koe_errors_total{code="replies_unread"}') == 1
        # the server stopped reading once its backlog was full: most of the flood was never answered
        assert metric(live, 'koe_errors_total{code="unknown_voice"}') < FLOOD / 2
        sock.close()
        assert_serving(live)


def test_pending_turns_per_session_are_bounded_and_the_session_goes_on(serve_fake: ServerFactory) -> None:
    gate = threading.Event()

    async def main(live: LiveServer) -> list[Event]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": "Held by the engine."})
            await send(ws, {"type": "flush"})
            for _ in range(100):
                await send(ws, {"type": "flush"})  # each opens an empty turn behind the held one
            refused = [await receive(ws) for _ in range(100 - 15)]
            gate.set()
            events = await until(ws, lambda m: m.get("type") == "flushed" and m["turn"] == 15)
            await send(ws, {"type": "append", "text": "And now this."})
            await send(ws, {"type": "flush"})
            return refused + events + await until(ws, of_type("flushed"))

    with serve_fake(engine=FakeEngine(gate=gate), max_pending_turns=16) as live:
        events = run(lambda: main(live))
        codes = [m.get("code") for m in messages(events) if m["type"] == "error"]
        assert codes == ["too_many_turns"] * (100 - 15)
        flushed = [m["turn"] for m in messages(events) if m["type"] == "flushed"]
        assert flushed == [*range(16), 16]  # turn numbers go to admitted turns only
        assert any(isinstance(e, bytes) for e in events[-3:])  # the session still speaks


def test_a_ping_flood_from_a_client_that_never_reads_does_not_pile_up_pongs(
    serve_fake: ServerFactory,
) -> None:
    with serve_fake(sock=loopback_socket(send_buffer=SMALL_BUFFER)) as live:
        sock = open_raw(live)
        for _ in range(20):
            sock.sendall(client_frame(0x9, b"p" * 125) * 1000)  # 20,000 pings: ~2.5 MB of pongs if answered

        def buffered() -> int:
            return live.call(
                lambda: max(
                    (c.transport.get_write_buffer_size() for c in live.server.server_state.connections),
                    default=0,
                )
            )

        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 1, "the session to run")
        assert buffered() < 128 * 1024  # at most the high-water mark and the last pongs, not 20,000 of them
        sock.close()
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 0, "the session to end")
        assert_serving(live)


def test_the_agent_routes_pass_the_servers_admission_control(serve_fake: ServerFactory) -> None:
    gate = threading.Event()

    async def main(live: LiveServer) -> None:
        async with connect(live.ws_url + "/v1/stream") as holder:  # the one session slot
            await send(holder, {"type": "config"})
            await receive(holder)
            async with connect(live.ws_url + "/agent/ws") as ws:
                refused = await receive(ws)
                try:
                    await receive(ws)
                except ConnectionClosed as closed:
                    code = close_code(closed)
            assert isinstance(refused, dict) and refused["code"] == "too_many_sessions" and code == 1013

            held = asyncio.create_task(
                asyncio.to_thread(
                    httpx.post, live.http_url + "/invocations", json={"text": "Held."}, timeout=60
                )
            )  # the one request slot, held by the engine's gate
            await asyncio.to_thread(
                wait_for, lambda: metric(live, 'koe_active_sessions{transport="http"}') == 1, "the hold"
            )
            agent = await asyncio.to_thread(
                httpx.post, live.http_url + "/agent/invocations", json={"read": "Hi."}, timeout=60
            )
            assert (agent.status_code, agent.json()["error"]) == (503, "too_many_sessions")
            assert int(agent.headers["retry-after"]) >= 1
            gate.set()
            assert (await held).status_code == 200

    with serve_fake(engine=FakeEngine(gate=gate), max_sessions=1, max_http_requests=1) as live:
        run(lambda: main(live))


def test_a_compression_offer_is_declined_so_no_message_is_inflated(serve_fake: ServerFactory) -> None:
    """A client offering permessage-deflate gets an uncompressed socket: a compressed frame (RSV1) is a
    protocol error, never 256 MB inflated from a 255 KB bomb."""
    with serve_fake() as live:
        sock = socket.create_connection((LOOPBACK, live.port))
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /v1/stream HTTP/1.1\r\nHost: {LOOPBACK}:{live.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n".encode()
        )
        answer = sock.recv(4096)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 101")
        assert b"permessage-deflate" not in answer.lower()
        assert_serving(live)


def test_a_message_in_endless_empty_fragments_is_closed_1009(serve_fake: ServerFactory) -> None:
    """Empty continuation frames add no bytes, so only a count stops them: past the bound the socket is
    closed 1009 and the server serves on."""
    with serve_fake() as live:
        sock = open_raw(live)
        first = client_frame(0x1, b"{")
        sock.sendall(bytes([first[0] & 0x7F]) + first[1:])  # a text frame without FIN
        continuation = client_frame(0x0, b"")
        empty = bytes([continuation[0] & 0x7F]) + continuation[1:]
        sock.sendall(empty * (2 * MAX_FRAGMENTS_PER_MESSAGE))
        assert server_close_code(sock) == 1009
        sock.close()
        assert_serving(live)


def test_a_text_frame_of_invalid_utf8_is_closed_1007(serve_fake: ServerFactory) -> None:
    """A text message that is not UTF-8 gets the close code that says so (RFC 6455 §8.1), not a socket
    dropped without a word; the server serves on."""
    with serve_fake() as live:
        sock = open_raw(live)
        sock.sendall(client_frame(0x1, b'{"type": "append", "text": "\xff\xfe"}'))
        assert server_close_code(sock) == 1007
        sock.close()
        assert_serving(live)


def server_close_code(sock: socket.socket) -> int:
    """The code of the server's close frame (its first bytes after what else the server sent)."""
    received = b""
    while b"\x88" not in received:
        chunk = sock.recv(4096)
        assert chunk, "the server dropped the socket without a close frame"
        received += chunk
    close = received[received.index(b"\x88") :]
    while len(close) < 4:
        close += sock.recv(4096)
    return int.from_bytes(close[2:4], "big")


def test_a_flood_of_small_frames_is_parsed_a_slice_per_event_loop_turn(
    serve_fake: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read holds up to 256 KiB: thousands of pings parsed and answered in one go held the loop for
    100-400 ms (before the fix; 2026-12-03, this 2-core machine, loaded), every other connection waiting."""
    ping = client_frame(0x9, b"p" * 125)
    per_turn: dict[int, int] = defaultdict(int)
    turn = [0]
    handle_ping = GuardedWSProtocol.handle_ping

    def counted(self: GuardedWSProtocol, event: Any) -> None:
        per_turn[turn[0]] += 1
        handle_ping(self, event)

    monkeypatch.setattr(GuardedWSProtocol, "handle_ping", counted)
    with serve_fake() as live:

        def tick() -> None:
            turn[0] += 1
            if sum(per_turn.values()) < FLOOD:
                live.loop.call_soon(tick)

        sock = open_raw(live)
        live.loop.call_soon_threadsafe(tick)
        sock.sendall(ping * FLOOD)
        wait_for(lambda: sum(per_turn.values()) == FLOOD, "every ping to be parsed")
        sock.close()
        assert max(per_turn.values()) <= BYTES_PER_TURN // len(ping) + 1
        assert_serving(live)


def test_a_message_in_one_frame_is_taken_however_many_slices_it_is_parsed_in(
    serve_fake: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fragment bound counts frames: each slice of a long frame is an event of its own (so is each read
    of one arriving in small TCP segments), and counting those closed a valid message 1009."""
    monkeypatch.setattr(connections, "BYTES_PER_TURN", 8)
    text = "Hello there. " * 1000  # 13,000 characters: some 1,600 slices of 8 bytes, one frame
    with serve_fake() as live:

        async def main() -> list[Event]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": text})
                await send(ws, {"type": "cancel"})
                return await until(ws, of_type("cancelled"))

        replies = [m["type"] for m in messages(run(main))]
        assert replies[-1] == "cancelled" and "error" not in replies
