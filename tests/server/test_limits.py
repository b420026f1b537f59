"""Every outside-input limit not crossed elsewhere: crossed on a server with small limits, answered with its
documented error, and the server still serves afterwards.

Crossed elsewhere: message bytes, text per message and per turn, idle and session time (test_stream_errors);
sessions at once and queue admission (test_server_limits); queued audio seconds (test_hostile_clients).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_checks import assert_serving, close_code, metric, wait_for
from live_server import LiveServer, ServerFactory
from ws_events import WAIT_S, receive, run, send

#: Under the segmenter's shortest cut and without punctuation: counted, never synthesized.
UNSPOKEN = "aaaa bbbb cccc "


def test_a_session_over_its_text_limit_is_closed_with_1008(serve_fake: ServerFactory) -> None:
    async def main(live: LiveServer) -> tuple[dict[str, object], int | None]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": UNSPOKEN})
            await send(ws, {"type": "cancel"})
            assert await receive(ws) == {"type": "cancelled", "turn": 0}
            await send(ws, {"type": "append", "text": UNSPOKEN})  # 30 characters: exactly the limit
            await send(ws, {"type": "cancel"})
            assert await receive(ws) == {"type": "cancelled", "turn": 1}
            await send(ws, {"type": "append", "text": "a"})  # a new turn, but the session is spent
            error = await receive(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert isinstance(error, dict)
        return error, close_code(closed.value)

    with serve_fake(max_session_chars=30) as live:
        error, code = run(lambda: main(live))
        assert (error["code"], code) == ("session_too_long", 1008)
        assert "30" in str(error["message"]) and "session" in str(error["message"])
        assert metric(live, 'koe_errors_total{code="session_too_long"}') == 1
        assert_serving(live)


def test_a_frame_past_the_transport_limit_is_closed_with_1009(serve_fake: ServerFactory) -> None:
    """Up to twice ``max_message_bytes`` koe explains the limit; past that uvicorn closes by itself."""

    async def main(live: LiveServer) -> int | None:
        async with connect(live.ws_url + "/v1/stream", max_size=None) as ws:
            await ws.send(json.dumps({"type": "append", "text": "x" * 5000}))
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        return close_code(closed.value)

    with serve_fake(max_message_bytes=1024) as live:
        assert run(lambda: main(live)) == 1009
        assert_serving(live)


def chunked(body: bytes, size: int = 512) -> Iterator[bytes]:
    """A body sent without Content-Length (chunked): the limit must hold while it is being read."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_bodies_over_the_limit_are_refused_with_413_on_every_speech_route(
    serve_fake: ServerFactory, declared: bool
) -> None:
    big = json.dumps({"text": "x" * 3000, "input": "x" * 3000, "model": "tts-1", "voice": "alloy"}).encode()
    headers = {"content-type": "application/json"}
    with serve_fake(max_body_bytes=2048) as live, httpx.Client(timeout=WAIT_S) as client:
        for path in ("/invocations", "/v1/audio/speech"):
            body = big if declared else chunked(big)
            response = client.post(live.http_url + path, content=body, headers=headers)
            assert response.status_code == 413, path
            error = response.json()
            if path.startswith("/v1/"):  # OpenAI's error shape
                assert error["error"]["code"] == "body_too_large" and "2048" in error["error"]["message"]
            else:
                assert error["error"] == "body_too_large" and "2048" in error["message"]
        assert_serving(live)


def test_openai_input_over_the_text_limit_is_refused_with_413(serve_fake: ServerFactory) -> None:
    body = {"model": "tts-1", "voice": "alloy", "input": "word " * 25}
    with serve_fake(max_request_chars=100) as live:
        response = httpx.post(live.http_url + "/v1/audio/speech", json=body, timeout=WAIT_S)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["code"] == "text_too_long" and "100" in error["message"]
        assert_serving(live)


def test_speech_requests_over_the_concurrency_limit_get_503_with_retry_after(
    serve_fake: ServerFactory,
) -> None:
    """One streamed request holds the only slot (its job waits behind a held worker); the next is refused."""
    release = threading.Event()
    with serve_fake(workers=1, max_http_requests=1) as live, httpx.Client(timeout=WAIT_S) as client:
        live.call(lambda: live.runtime.scheduler.submit(lambda: release.wait(WAIT_S), deadline=0, cost_s=3))
        body = {"text": "Held.", "format": "pcm", "stream": True}
        with client.stream("POST", live.http_url + "/invocations", json=body) as held:
            assert held.status_code == 200
            for path, request in (
                ("/invocations", {"text": "Hi."}),
                ("/v1/audio/speech", {"model": "tts-1", "voice": "alloy", "input": "Hi."}),
            ):
                refused = client.post(live.http_url + path, json=request)
                assert refused.status_code == 503, path
                assert int(refused.headers["retry-after"]) >= 1
                code = refused.json()["error"]
                assert (code["code"] if isinstance(code, dict) else code) == "too_many_sessions"
            release.set()
            assert len(held.read()) > 0  # the admitted request is served in full
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="http"}') == 0, "the slot to free")
        assert client.post(live.http_url + "/invocations", json={"text": "Hi.", "format": "pcm"}).content
        assert_serving(live)
