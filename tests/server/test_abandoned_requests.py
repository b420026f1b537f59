"""Work that goes on for nobody: an HTTP client that leaves, or never reads, stops its synthesis and frees
its slot, on every HTTP route, streamed or not.

Each test counts the scheduler's own jobs: a request of many segments is left after its first ones; once
its slot is free, at most the segments already running or queued then may still finish (the engine cannot
be interrupted mid-segment), never the rest of the text. On the real model, a request whose text is a number
thousands of digits long, left in any language, frees its worker within a second.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable

import httpx
import pytest

from koe.languages import CODES
from koe.scheduler.queue import SchedulerStats
from live_checks import failures_logged, metric, wait_for
from live_server import LOOPBACK, LiveServer, ServerFactory, loopback_socket
from long_numbers import FREED_WITHIN_S, LONG_NUMBER, voice_of
from support.fake import FakeEngine

#: Forty sentences, each one segment: long enough that finishing it for nobody would be seen.
SENTENCES = 40
TEXT = " ".join(f"This is sentence number {n} of a story nobody hears." for n in range(SENTENCES))
#: Segments one request has in flight at most (one running, the next queued: ``segments_ahead`` 1).
IN_FLIGHT = 2


def stats(live: LiveServer) -> SchedulerStats:
    return live.call(lambda: live.runtime.scheduler.stats)


def finished(live: LiveServer) -> int:
    s = stats(live)
    return s.completed + s.discarded + s.failed


def send_request(
    live: LiveServer, path: str, body: dict[str, object], *, receive_buffer: int = 0
) -> socket.socket:
    sock = socket.socket()
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((LOOPBACK, live.port))
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {LOOPBACK}:{live.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def reset(sock: socket.socket) -> None:
    """Leave abruptly, as a client whose connection was reset does (RST, no FIN)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def slot_free(live: LiveServer) -> Callable[[], bool]:
    return lambda: metric(live, 'koe_active_sessions{transport="http"}') == 0


REQUESTS = {
    "invocations, one WAV file": ("/invocations", {"text": TEXT, "stream": False}),
    "invocations, streamed PCM": ("/invocations", {"text": TEXT, "format": "pcm"}),
    "openai, streamed MP3": ("/v1/audio/speech", {"model": "tts-1", "input": TEXT, "voice": "alloy"}),
    "openai, timestamps (one JSON body)": (
        "/v1/audio/speech",
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "timestamps": True},
    ),
    "openai, SSE": (
        "/v1/audio/speech",
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "stream_format": "sse"},
    ),
    "agent, SSE": ("/agent/invocations", {"read": TEXT, "tokens_per_s": 1000, "first_token_delay_s": 0}),
}


@pytest.mark.parametrize("name", list(REQUESTS))
def test_a_client_that_leaves_stops_its_synthesis_within_a_segment(
    serve_fake: ServerFactory, name: str
) -> None:
    path, body = REQUESTS[name]
    with failures_logged() as failures, serve_fake(engine=FakeEngine(delay_s=0.05)) as live:
        before = finished(live)
        sock = send_request(live, path, body)
        wait_for(lambda: finished(live) >= before + 2, "two segments to be synthesized")
        reset(sock)
        wait_for(slot_free(live), "the request's slot to be released")
        left_at = finished(live)
        wait_for(lambda: stats(live).running == 0 and stats(live).queued == 0, "the scheduler to idle")
        assert finished(live) - left_at <= IN_FLIGHT
        assert finished(live) - before < SENTENCES  # the rest of the text was never synthesized
        assert metric(live, 'koe_errors_total{code="internal_error"}') == 0
    assert [record.getMessage() for record in failures] == []


@pytest.mark.parametrize("path", ["/invocations", "/v1/audio/speech", "/agent/invocations"])
def test_clients_that_never_read_a_streamed_response_free_their_slots_after_the_send_deadline(
    serve_fake: ServerFactory, path: str
) -> None:
    body = {
        "/invocations": {"text": TEXT * 4, "format": "pcm"},
        "/v1/audio/speech": {"model": "tts-1", "input": TEXT * 4, "voice": "alloy", "response_format": "pcm"},
        "/agent/invocations": {"read": TEXT, "tokens_per_s": 1000, "first_token_delay_s": 0},
    }[path]
    limits = {"max_http_requests": 2, "max_request_chars": 40_000, "send_timeout_s": 1.0}
    with serve_fake(sock=loopback_socket(send_buffer=4096), **limits) as live:
        stuck = [send_request(live, path, body, receive_buffer=4096) for _ in range(2)]
        try:
            wait_for(lambda: metric(live, 'koe_active_sessions{transport="http"}') == 2, "both slots taken")
            refused = httpx.post(live.http_url + "/invocations", json={"text": "Hi.", "format": "pcm"})
            assert (refused.status_code, refused.json()["error"]) == (503, "too_many_sessions")
            wait_for(slot_free(live), "the stalled responses to be dropped")
            served = httpx.post(live.http_url + "/invocations", json={"text": "Hi.", "format": "pcm"})
            assert served.status_code == 200 and len(served.content) > 0
        finally:  # closed whatever failed: a socket left open warns into another test
            for sock in stuck:
                sock.close()


@pytest.mark.serial
@pytest.mark.parametrize("lang", CODES)
def test_a_client_that_leaves_a_number_thousands_of_digits_long_frees_its_worker_within_a_second(
    serve_app: ServerFactory, lang: str
) -> None:
    """The reported request: its G2P once ran on for minutes after the client had gone."""
    body = {"text": LONG_NUMBER, "voice": voice_of(lang), "lang": lang}
    with serve_app() as live:
        before = finished(live)
        sock = send_request(live, "/invocations", body)
        wait_for(lambda: finished(live) > before and stats(live).running > 0, "a segment to be synthesized")
        reset(sock)
        left = time.monotonic()
        wait_for(lambda: stats(live).running == 0 and stats(live).queued == 0, "the scheduler to idle")
        freed_s = time.monotonic() - left
    print(f"{lang}: worker free {freed_s * 1000:.0f} ms after the client left")
    assert freed_s < FREED_WITHIN_S
