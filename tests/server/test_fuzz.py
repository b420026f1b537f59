"""Random sequences of valid, malformed and hostile input against the live server, on every route.

Whatever arrives, a client gets either its answer or a documented error code (never ``internal_error``,
never a traceback or a source path), sessions close only with a limit's own code, nothing is logged as an
unexpected failure, and afterwards ``/ping`` answers and a clean session speaks exactly what a fresh model
says. The server runs on the scripted fake engine, so hundreds of sequences take seconds; every route and
parser between the socket and the engine is the real one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from koe.audio.pcm import to_pcm16
from koe.settings import Settings
from live_checks import assert_serving, close_code, failures_logged, no_leak
from live_server import LiveServer
from support.fake import fake_speech

#: Where every error code a client may be told is documented.
DOCS = (Path(__file__).parents[2] / "docs" / "api.md").read_text() + (
    Path(__file__).parents[2] / "docs" / "protocol.md"
).read_text()
#: Close codes for a session that ended: normal (after ``close``), policy (a limit), message too big.
CLOSES = {1000, 1008, 1009}
#: uvicorn's own frame limit: twice ``max_message_bytes`` (koe.server.serve), in bytes.
TRANSPORT_LIMIT = 2 * Settings().max_message_bytes
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)

tiny_text = st.sampled_from(["Hi.", "Ok", "yes", "a b", "", "   "])
hostile_text = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=12),  # control characters, surrogates excluded
    st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp"]), max_size=8),
    st.integers(1, 6).map(lambda n: "😀👍🏽🇯🇵" * n),
)
flood = st.integers(16_001, 40_000).map(lambda n: "😀" * n)  # over the per-message text limit
voice = st.one_of(
    st.sampled_from(["af_heart", "bf_emma", "af_bella(2)+af_sky", "../../etc/passwd", "/dev/zero", "C:\\x"]),
    st.sampled_from(["af_heart/../..", "%2e%2e/", "af_heart\x00", "zz_nobody", "af_heart(+)", ""]),
    st.integers(201, 5000).map(lambda n: "a" * n),
    st.integers(-5, 5),
)
number = st.one_of(
    st.sampled_from([0, -1, 0.0, -0.5, 1e308, -1e308, 10**40, 2**63, 1.0, 0.5, 2.0, 5e-324]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(),
)
anything = st.recursive(
    st.none() | st.booleans() | number | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _frame(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)


class Short:
    """A frame or body whose repr stays short (hypothesis prints failing examples; floods are huge)."""

    def __init__(self, data: str | bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data.encode() if isinstance(self.data, str) else self.data)

    def __repr__(self) -> str:
        shown = repr(self.data[:80])
        return shown if len(self.data) <= 80 else f"{shown}... ({len(self.data)} long)"


ws_frame = st.one_of(
    st.sampled_from([_frame({"type": "cancel"}), _frame({"type": "Clear"}), _frame({"type": "flush"})]),
    st.builds(lambda t: _frame({"type": "append", "text": t}), tiny_text | hostile_text),
    st.builds(lambda t: _frame({"type": "Speak", "text": t}), hostile_text),
    st.builds(lambda t: _frame({"type": "append", "text": t}), flood),
    st.builds(lambda t, r: _frame({"text": t, "request_id": r}), tiny_text, anything),
    st.builds(
        lambda v, s, r, f: _frame({"type": "config", "voice": v, "speed": s, "sample_rate": r, "format": f}),
        voice,
        number,
        number,
        st.sampled_from(["pcm", "mulaw", "mp3", "", "../x"]) | anything,
    ),
    st.sampled_from(['{"type":"config","speed":NaN}', '{"type":"config","speed":Infinity}', "-Infinity"]),
    st.builds(lambda k, v: _frame({"type": k, "text": v}), anything, anything),
    st.text(max_size=40),  # mostly not JSON
    st.binary(max_size=64),  # binary noise, usually not UTF-8
    st.just(b'{"type": "append", "text": "\xff\xfe"}'),  # invalid UTF-8 inside JSON
    st.sampled_from(["[]", "null", "1e999", '"append"', '{"type": null}', "{" * 5000]),
).map(Short)


def check_error(message: dict[str, Any]) -> None:
    assert message["code"] != "internal_error" and f"`{message['code']}`" in DOCS, message
    assert isinstance(message["message"], str) and message["message"] and no_leak(message["message"])


async def play(live: LiveServer, frames: list[Short]) -> None:
    """Send ``frames`` then ``cancel``; read to the ``cancelled`` reply or the close, checking each reply."""
    async with asyncio.timeout(60), connect(live.ws_url + "/v1/stream", max_size=None) as ws:
        try:
            for frame in [*frames, Short(_frame({"type": "cancel"}))]:
                await ws.send(frame.data)
            while True:
                reply = await ws.recv()
                if isinstance(reply, bytes):
                    continue
                assert no_leak(reply)
                message = json.loads(reply)
                if message["type"] == "error":
                    check_error(message)
                if message["type"] == "cancelled":
                    return
        except ConnectionClosed as closed:
            code = close_code(closed)
            # past the transport limit uvicorn closes at once; its 1009 can be lost to the TCP reset that
            # the client's further unread frames cause, so the client may see no close frame at all
            assert code in CLOSES or (code is None and max(map(len, frames)) > TRANSPORT_LIMIT), closed


def test_random_streams_of_hostile_frames_leave_the_server_serving(fake_server: LiveServer) -> None:
    @FUZZ
    @given(frames=st.lists(ws_frame, min_size=1, max_size=8))
    def sequence(frames: list[Short]) -> None:
        asyncio.run(play(fake_server, frames))

    with failures_logged() as failures:
        sequence()
    assert failures == []
    assert assert_serving(fake_server) == to_pcm16(fake_speech().synthesize("Hi there."))


# --- HTTP ------------------------------------------------------------------------------------------------

ROUTES = {
    "/invocations": ["text", "voice", "speed", "format", "sample_rate", "stream", "request_timestamp"],
    "/v1/audio/speech": ["model", "input", "voice", "speed", "response_format", "stream_format"],
    "/agent/invocations": ["read", "voice", "speed", "tokens_per_s", "first_token_delay_s", "session_id"],
}
field_value = st.one_of(anything, voice, number, tiny_text, hostile_text)


@st.composite
def http_request(draw: st.DrawFn) -> tuple[str, Short, str]:
    path = draw(st.sampled_from(sorted(ROUTES)))
    keys = ROUTES[path]
    fields = draw(st.dictionaries(st.sampled_from(keys), field_value, max_size=len(keys)))
    if path == "/agent/invocations":
        # a read that gets through is over at once (and no prompt: no LLM is asked)
        fields.update(tokens_per_s=1000, first_token_delay_s=0)
    body = draw(
        st.one_of(
            st.just(json.dumps(fields, ensure_ascii=False).encode()),
            st.just(json.dumps({**fields, "text": "😀" * 20_001}).encode()),
            st.binary(max_size=64),
            st.text(max_size=40).map(str.encode),
            st.sampled_from([b"{", b"[]", b"null", b'{"text": NaN}', b'{"input": Infinity}', b"\xff\xfe{}"]),
        )
    )
    content_type = draw(
        st.sampled_from(
            ["application/json", "text/plain", "application/xml", "", "application/json; charset=utf-16"]
        )
    )
    return path, Short(body), content_type


def test_random_http_requests_get_an_answer_or_a_documented_error(fake_server: LiveServer) -> None:
    @FUZZ
    @given(request=http_request())
    def one(request: tuple[str, Short, str]) -> None:
        path, body, content_type = request
        headers = {"content-type": content_type} if content_type else {}
        response = httpx.post(fake_server.http_url + path, content=body.data, headers=headers, timeout=60)
        assert response.status_code in {200, 400, 408, 413, 415}, (response.status_code, response.text[:300])
        if response.status_code != 200 or "event-stream" in response.headers["content-type"]:
            assert no_leak(response.text)
        if response.status_code != 200:
            body = response.json()
            openai_shape = isinstance(body["error"], dict)
            check_error(
                body["error"] if openai_shape else {"code": body["error"], "message": body["message"]}
            )

    with failures_logged() as failures:
        one()
    assert failures == []
    assert httpx.get(fake_server.http_url + "/ping").status_code == 200


@pytest.mark.parametrize(
    "query", ["speed=NaN", "speed=inf", "sample_rate=99999999999999999999", "voice=..%2F..%2Fx"]
)
def test_hostile_query_strings_are_reported_and_the_session_opens(
    fake_server: LiveServer, query: str
) -> None:
    async def main() -> dict[str, Any]:
        async with asyncio.timeout(60), connect(f"{fake_server.ws_url}/v1/stream?{query}") as ws:
            reply = json.loads(await ws.recv())
            await ws.send(_frame({"type": "cancel"}))
            assert json.loads(await ws.recv())["type"] == "cancelled"
            return dict(reply)

    error = asyncio.run(main())
    assert error["type"] == "error"
    check_error(error)
