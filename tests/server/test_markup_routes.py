"""Pronunciation markup on the transports, on the fake engine: a whole text with markup that cannot be
honoured is refused before any audio; on a WebSocket a turn's bad element fails its segment only, the turn
goes on, and word timings point at the written word."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.app import create_app
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, run_server
from support.fake import FakeEngine, fake_speech
from ws_events import audio, messages, of_type, run, send, until


@pytest.fixture(scope="module")
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture(scope="module")
def server(engine: FakeEngine) -> Iterator[LiveServer]:
    # no first segment joined with the next for windowing: each test knows where its segments end
    settings = Settings(host=LOOPBACK, port=0, segment_cache_mb=0, windowed_first=False)
    with run_server(create_app(settings, fake_speech(engine)), settings) as live:
        yield live


@pytest.mark.parametrize(
    ("text", "phonemes"),
    [("Say [tomato](/təmˈɑtO/) now.", "say təmˈɑtO now."),
     ('<speak>Say <phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme> now.</speak>',
      "say təˈmAtO now.")],
)  # fmt: skip
def test_a_word_s_own_phonemes_reach_the_engine_from_a_whole_text_route(
    server: LiveServer, engine: FakeEngine, text: str, phonemes: str
) -> None:
    body = {"model": "kokoro", "input": text, "voice": "af_heart", "response_format": "pcm"}
    response = httpx.post(server.http_url + "/v1/audio/speech", json=body)
    assert response.status_code == 200 and response.content
    assert phonemes in engine.worked


@pytest.mark.parametrize(
    ("text", "says"),
    [("Wait [pause:11s] here.", "at most 10 s"),
     ("Say [tomato](/təm☃tO/).", "'☃'"),
     ("Hello <break/> [Kokoro](/kˈOk", "ending inside")],
)  # fmt: skip
def test_whole_text_with_bad_markup_is_refused_before_any_audio(
    server: LiveServer, text: str, says: str
) -> None:
    body = {"model": "kokoro", "input": text, "voice": "af_heart"}
    response = httpx.post(server.http_url + "/v1/audio/speech", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_markup" and says in error["message"]


def test_a_streamed_element_left_open_fails_its_segment_and_the_turn_goes_on(server: LiveServer) -> None:
    async def main() -> list[Any]:
        async with connect(server.ws_url + "/v1/stream?voice=af_heart") as ws:
            for piece in ["Say [Ko", "koro](/kˈOkəɹO/) again.\n", "Then [New Yo", "rk](/nˈu"]:
                await send(ws, {"type": "append", "text": piece})
            await send(ws, {"type": "flush"})
            events = await until(ws, of_type("flushed"))
            await send(ws, {"type": "append", "text": "And [pause:200ms] on."})
            await send(ws, {"type": "flush"})
            return events + await until(ws, of_type("flushed"))

    events = run(main)
    replies = messages(events)
    assert [m["code"] for m in replies if m["type"] == "error"] == ["invalid_markup"]
    assert [m["text"] for m in replies if m["type"] == "segment"] == [
        "Say [Kokoro](/kˈOkəɹO/) again.",
        "And [pause:200ms] on.",
    ]
    words = [w["word"] for m in replies if m["type"] == "words" for w in m["words"]]
    assert words == ["Say", "Kokoro", "again", "And", "on"]
    assert audio(events)


def test_whole_text_ssml_that_is_malformed_is_refused_with_where(server: LiveServer) -> None:
    body = {"model": "kokoro", "input": "<speak>Hello <break time=", "voice": "af_heart"}
    response = httpx.post(server.http_url + "/v1/audio/speech", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_markup" and "line 1, column" in error["message"]


def test_an_ssml_turn_streamed_in_pieces_is_read_once_flushed_and_points_at_its_ssml(
    server: LiveServer,
) -> None:
    ssml = '<speak>Hello there. <break time="500ms"/> See the <sub alias="World Wide Web">WWW</sub>.</speak>'

    async def main() -> list[Any]:
        async with connect(server.ws_url + "/v1/stream?voice=af_heart") as ws:
            for start in range(0, len(ssml), 7):
                await send(ws, {"type": "append", "text": ssml[start : start + 7]})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    replies = messages(run(main))
    assert not [m for m in replies if m["type"] == "error"]
    segments = [m for m in replies if m["type"] == "segment"]
    assert all(m["text"] == ssml[m["source_span"][0] : m["source_span"][1]] for m in segments)
    words = [w for m in replies if m["type"] == "words" for w in m["words"]]
    assert [w["word"] for w in words] == [
        "Hello",
        "there",
        "See",
        "the",
        '<sub alias="World Wide Web">WWW</sub>',
    ]
