"""The hostile clients' checks on scripted answers: a refusal in each route's shape, and a turn after an
attack that must be heard to its end (no server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import httpx
import pytest
from websockets.asyncio.client import ClientConnection

from koe.errors import UpstreamError
from koe_bench.hostile_checks import SPOKEN, expect_refusal, speaks


@pytest.mark.parametrize(
    "body",
    [
        {"err_code": "invalid_field", "err_msg": "…"},  # Deepgram's
        {"error": {"code": "invalid_field", "message": "…"}},  # OpenAI's
        {"error": "invalid_field", "message": "…"},  # koe's own
    ],
    ids=["deepgram", "openai", "koe"],
)
def test_a_refusal_is_read_in_whichever_shape_the_route_answers(body: dict[str, Any]) -> None:
    expect_refusal(httpx.Response(400, json=body), 400, "invalid_field")
    with pytest.raises(UpstreamError, match="expected 400 invalid_message, got 400"):
        expect_refusal(httpx.Response(400, json=body), 400, "invalid_message")


def test_a_refusal_with_another_status_fails_saying_what_came() -> None:
    with pytest.raises(UpstreamError, match="expected 415 unsupported_media_type, got 400"):
        expect_refusal(httpx.Response(400, json={"error": "invalid_json"}), 415, "unsupported_media_type")


class ScriptedSocket:
    """Answers a turn with ``frames``; keeps what the client sent."""

    def __init__(self, *frames: str | bytes) -> None:
        self.sent: list[dict[str, Any]] = []
        self._frames = list(frames)

    async def send(self, message: str) -> None:
        self.sent.append(json.loads(message))

    async def recv(self) -> str | bytes:
        return self._frames.pop(0)


def speak(*frames: str | bytes) -> ScriptedSocket:
    ws = ScriptedSocket(*frames)
    asyncio.run(speaks(cast(ClientConnection, ws)))
    return ws


FLUSHED = json.dumps({"type": "flushed"})


def test_a_turn_heard_to_its_flush_with_audio_passes() -> None:
    ws = speak(json.dumps({"type": "segment", "text": SPOKEN}), b"\0\0" * 480, FLUSHED)
    assert ws.sent == [{"type": "append", "text": SPOKEN}, {"type": "flush"}]


def test_a_turn_without_audio_or_with_an_error_fails() -> None:
    with pytest.raises(UpstreamError, match="ended without audio"):
        speak(FLUSHED)
    with pytest.raises(UpstreamError, match=r"got .*too_many_turns"):
        speak(b"\0\0", json.dumps({"type": "error", "code": "too_many_turns"}), FLUSHED)
