"""Slow and silent clients are closed on the server's clock: a request head or body that never completes,
and a session that says nothing while nothing is being spoken, whatever it left open."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_checks import assert_serving, close_code, metric, wait_for
from live_server import LOOPBACK, LiveServer, ServerFactory
from support.fake import FakeEngine
from ws_events import WAIT_S, Event, messages, receive, run, send

TIMEOUT_S = 1.0


def trickle(live: LiveServer, data: bytes, *, pause_s: float = 0.05) -> tuple[bytes, int]:
    """Send ``data`` a byte at a time until the server closes the socket; returns what the server answered
    and how many bytes it took before closing."""
    with socket.create_connection((LOOPBACK, live.port)) as sock:
        sock.settimeout(pause_s)
        answer = b""
        for sent, byte in enumerate(data):
            try:
                sock.sendall(bytes([byte]))
                chunk = sock.recv(65536)
                if not chunk:
                    return answer, sent
                answer += chunk
            except TimeoutError:
                continue  # nothing to read yet: the server is still waiting
            except OSError:
                return answer, sent
    raise AssertionError(f"the server kept the socket open for all {len(data)} bytes")


@pytest.fixture(scope="module")
def impatient(serve_fake: ServerFactory) -> LiveServer:  # type: ignore[misc]
    with serve_fake(header_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S) as live:
        yield live


def test_a_request_head_sent_a_byte_at_a_time_is_closed_after_the_header_timeout(
    impatient: LiveServer,
) -> None:
    head = f"GET /ping HTTP/1.1\r\nHost: {LOOPBACK}\r\n" + "X-Slow: " + "a" * 2000
    started = time.monotonic()
    answer, sent = trickle(impatient, head.encode())
    assert answer == b"" and time.monotonic() - started >= TIMEOUT_S  # closed without a response...
    assert sent < len(head)  # ...long before the head could have ended
    assert_serving(impatient)


def test_the_next_request_head_on_a_kept_alive_connection_has_a_deadline_too(impatient: LiveServer) -> None:
    with socket.create_connection((LOOPBACK, impatient.port)) as sock:
        sock.sendall(f"GET /ping HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.settimeout(0.05)
        for byte in b"GET /ping HTTP/1.1\r\nX-Slow: " + b"a" * 2000:  # each byte resets uvicorn's own timer
            try:
                sock.sendall(bytes([byte]))
                if sock.recv(65536) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        else:
            raise AssertionError("the kept-alive connection was never closed")


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_that_never_ends_gets_408_and_the_connection_closes(
    impatient: LiveServer, framing: str
) -> None:
    length = "Content-Length: 100000" if framing == "content-length" else "Transfer-Encoding: chunked"
    head = f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Type: text/plain\r\n{length}\r\n\r\n"
    body = b"Hello " * 5000 if framing == "content-length" else b"6\r\nHello \r\n" * 3000
    with socket.create_connection((LOOPBACK, impatient.port)) as sock:
        sock.sendall(head.encode())
        sock.settimeout(0.05)
        answer = b""
        for n in range(0, len(body), 8):
            try:
                sock.sendall(body[n : n + 8])
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"connection: close" in answer.lower() and b'"body_timeout"' in answer
    assert metric(impatient, 'koe_errors_total{code="body_timeout"}') >= 1


def test_a_quick_body_is_not_cut_by_the_body_timeout(impatient: LiveServer) -> None:
    response = httpx.post(impatient.http_url + "/invocations", json={"text": "Hello there.", "format": "pcm"})
    assert response.status_code == 200 and response.content


# --- idle sessions -----------------------------------------------------------------------------------------


async def closed_with(
    live: LiveServer, path: str, frames: list[dict[str, object]]
) -> tuple[list[Event], int | None]:
    """Send ``frames``, then read (never writing again) until the server closes."""
    events: list[Event] = []
    async with connect(live.ws_url + path) as ws:
        for frame in frames:
            await send(ws, frame)
        try:
            while True:
                events.append(await receive(ws))
        except ConnectionClosed as closed:
            return events, close_code(closed)


@pytest.mark.parametrize(
    ("path", "frames"),
    [
        ("/v1/stream", [{"type": "append", "text": "Spoken at once. And this waits for more"}]),
        ("/v1/speak", [{"type": "Speak", "text": "Spoken at once. And this waits for more"}]),
        ("/v1/stream", [{"type": "append", "text": "A finished turn."}, {"type": "flush"}]),
        ("/invocations-bidirectional-stream", [{"text": "A finished request."}]),
    ],
    ids=["unflushed-append", "deepgram-speak", "finished-turn", "aws-request"],
)
def test_a_session_quiet_with_nothing_being_spoken_is_closed_at_the_idle_timeout(
    serve_fake: ServerFactory, path: str, frames: list[dict[str, object]]
) -> None:
    with serve_fake(idle_timeout_s=TIMEOUT_S) as live:
        events, code = run(lambda: closed_with(live, path, frames))
        assert any(isinstance(e, bytes) for e in events)  # what could be spoken was spoken...
        assert messages(events)[-1]["code"] == "idle_timeout" and code == 1008  # ...then the session idled
        assert_serving(live)


@pytest.mark.slow
def test_a_session_listening_to_a_long_turn_is_not_idle(serve_fake: ServerFactory) -> None:
    text = " ".join(f"Sentence {n} takes the slow engine a while." for n in range(6))
    # each segment one engine call (none in windows), and each call > the timeout
    with serve_fake(engine=FakeEngine(delay_s=0.4, windowed=False), idle_timeout_s=0.3) as live:
        events, code = run(
            lambda: closed_with(live, "/v1/stream", [{"type": "append", "text": text}, {"type": "flush"}])
        )
        kinds = [m["type"] for m in messages(events)]
        assert kinds.count("segment_end") >= 6 and kinds.index("flushed") < kinds.index("error")
        assert messages(events)[-1]["code"] == "idle_timeout" and code == 1008  # idle only once it was spoken


def test_a_client_that_stops_reading_a_finished_turn_is_closed_when_idle(serve_fake: ServerFactory) -> None:
    """Its turn's audio cannot drain, so the turn never ends: the idle timeout still applies."""
    read = threading.Event()

    async def main(live: LiveServer) -> int | None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((LOOPBACK, live.port))
        async with connect(live.ws_url + "/v1/stream", sock=sock, max_queue=1, ping_interval=None) as ws:
            await send(ws, {"type": "append", "text": "A long answer. " * 60})
            await send(ws, {"type": "flush"})
            await asyncio.to_thread(
                wait_for, lambda: metric(live, 'koe_errors_total{code="idle_timeout"}') == 1, "idle", WAIT_S
            )
            read.set()
            try:
                while True:
                    await receive(ws)
            except ConnectionClosed as closed:
                return close_code(closed)

    limits = {"idle_timeout_s": TIMEOUT_S, "audio_high_water_s": 1.0, "audio_low_water_s": 0.5}
    with serve_fake(**limits) as live:
        assert run(lambda: main(live)) in (1008, None)  # the close may be lost behind the unread audio
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 0, "the session to end")
        assert_serving(live)
    assert read.is_set()
