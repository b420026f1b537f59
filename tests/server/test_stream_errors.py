"""Bad input on the stream: recoverable errors keep the session, limits close it with their code."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_checks import assert_serving, close_code
from live_server import LiveServer, ServerFactory
from ws_events import receive, run, send


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{oops", "invalid_json"),
        (b"\x00\xff\xfe binary noise", "invalid_json"),
        (json.dumps({"type": "dance"}), "invalid_message"),
        (json.dumps({"type": "append", "text": 42}), "invalid_message"),
        (json.dumps({"type": "config", "voice": "zz_nobody"}), "unknown_voice"),
        (json.dumps({"type": "config", "voice": "../../etc/passwd"}), "unknown_voice"),
        (json.dumps({"type": "config", "speed": 0}), "invalid_field"),
        (json.dumps({"type": "config", "format": "mp3"}), "invalid_field"),
        (json.dumps({"text": "   "}), "invalid_field"),
    ],
)
def test_recoverable_errors_are_reported_and_the_session_goes_on(
    fake_server: LiveServer, frame: str | bytes, code: str
) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await ws.send(frame)
            error = await receive(ws)
            assert isinstance(error, dict)
            assert (error["type"], error["code"]) == ("error", code)
            assert error["message"]
            await send(ws, {"type": "config"})
            ack = await receive(ws)
            assert isinstance(ack, dict) and ack["type"] == "config" and ack["voice"] == "af_heart"

    run(main)


def test_a_bad_query_parameter_is_reported_and_the_default_kept(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream?sample_rate=12345&voice=af_sky") as ws:
            error = await receive(ws)
            await send(ws, {"type": "config"})
            ack = await receive(ws)
        assert (
            isinstance(error, dict) and error["code"] == "invalid_field" and "sample_rate" in error["message"]
        )
        assert isinstance(ack, dict) and (ack["sample_rate"], ack["voice"]) == (24000, "af_heart")

    run(main)


def test_limits_close_the_session_with_their_codes(serve_fake: ServerFactory) -> None:
    async def session(live: LiveServer, frames: list[str]) -> tuple[dict[str, object], int | None]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            for frame in frames:
                await ws.send(frame)
            error = await receive(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
            assert isinstance(error, dict)
            return error, close_code(closed.value)

    append = json.dumps({"type": "append", "text": "word " * 30})  # 150 characters

    async def main(live: LiveServer) -> None:
        big = json.dumps({"type": "append", "text": "x" * 3000})
        error, code = await session(live, [big])
        assert (error["code"], code) == ("message_too_large", 1009)
        long_text = json.dumps({"type": "append", "text": "x" * 900})
        error, code = await session(live, [long_text])
        assert (error["code"], code) == ("text_too_long", 1009)
        error, code = await session(live, [append] * 3)
        assert (error["code"], code) == ("turn_too_long", 1008)
        assert "400" in str(error["message"])

    with serve_fake(max_message_bytes=2048, max_message_chars=800, max_turn_chars=400) as live:
        run(lambda: main(live))
        assert_serving(live)


def test_idle_and_expired_sessions_are_closed_with_1008(serve_fake: ServerFactory) -> None:
    async def closing_error(live: LiveServer) -> tuple[object, int | None]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            error = await receive(ws)  # sent by the server on its own clock: the limit
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert isinstance(error, dict)
        return error["code"], close_code(closed.value)

    with serve_fake(idle_timeout_s=0.5) as live:
        assert run(lambda: closing_error(live)) == ("idle_timeout", 1008)
        assert_serving(live)  # a session that speaks is not idle
    with serve_fake(max_session_s=0.5, idle_timeout_s=60.0) as live:
        assert run(lambda: closing_error(live)) == ("session_expired", 1008)
        assert httpx.get(live.http_url + "/ping").status_code == 200
        speech = httpx.post(live.http_url + "/invocations", json={"text": "Hi.", "format": "pcm"}, timeout=60)
        assert speech.status_code == 200 and len(speech.content) > 0
