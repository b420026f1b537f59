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


#: A span faster than the voice, one in French, and the voice's own speech between them.
STYLED = (
    '<speak>Hello there. <prosody rate="x-fast">Quick words.</prosody> Then '
    '<lang xml:lang="fr-FR">Bonjour.</lang> Bye.</speak>'
)


def _spoken_as(engine: FakeEngine, calls_before: int) -> dict[str, tuple[float, str]]:
    """Each engine call since ``calls_before``: its phonemes → its speed and the voice whose style it had."""
    voices = fake_speech(engine).voices
    tables = {name: voices.resolve(name) for name in ("af_heart", "ff_siwis")}
    return {
        request.phonemes: (
            request.speed,
            next(name for name, table in tables.items() if (table == request.style).all()),
        )
        for request in engine.requests[calls_before:]
    }


def _check_styled(spoken: dict[str, tuple[float, str]]) -> None:
    assert spoken["hello there."] == (1.0, "af_heart")
    assert spoken["quick words."] == (1.5, "af_heart")
    assert spoken["bonjour."] == (1.0, "ff_siwis")
    assert spoken["bye."] == (1.0, "af_heart")


def test_prosody_rate_and_lang_reach_the_engine_as_speed_and_voice_over_http(
    server: LiveServer, engine: FakeEngine
) -> None:
    before = len(engine.requests)
    body = {"model": "kokoro", "input": STYLED, "voice": "af_heart", "response_format": "pcm"}
    response = httpx.post(server.http_url + "/v1/audio/speech", json=body)
    assert response.status_code == 200 and response.content
    _check_styled(_spoken_as(engine, before))


def test_prosody_rate_and_lang_reach_the_engine_from_a_streamed_turn(
    server: LiveServer, engine: FakeEngine
) -> None:
    before = len(engine.requests)

    async def main() -> list[Any]:
        async with connect(server.ws_url + "/v1/stream?voice=af_heart&speed=1.6") as ws:
            await send(ws, {"type": "append", "text": STYLED})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    replies = messages(run(main))
    assert not [m for m in replies if m["type"] == "error"]
    spoken = _spoken_as(engine, before)
    assert spoken["hello there."] == (1.6, "af_heart")
    assert spoken["quick words."] == (2.0, "af_heart")  # 1.6 × 1.5, held at the fastest speed
    assert spoken["bonjour."] == (1.6, "ff_siwis")


def test_a_lang_span_s_script_is_checked_in_its_own_language(server: LiveServer) -> None:
    """Kana in an English request is refused before any audio; inside a Japanese ``<lang>`` span it is
    read by that language."""

    def status(text: str) -> int:
        body = {"model": "kokoro", "input": text, "voice": "af_heart", "response_format": "pcm"}
        return httpx.post(server.http_url + "/v1/audio/speech", json=body).status_code

    assert status("<speak>Say こんにちは now.</speak>") == 400
    assert status('<speak>Say <lang xml:lang="ja">こんにちは</lang> now.</speak>') == 200
