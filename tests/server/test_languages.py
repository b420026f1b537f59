"""The language reaches the G2P on every transport: from the voice's first letter, or an explicit ``lang``
(WebSocket config and query — with Deepgram's ``language`` — the AWS sample's request, ``/invocations``,
``/v1/audio/speech``); bad languages, mixed blends and unreadable scripts are clear errors, and the
session goes on. The fake engine's G2P records which language read what."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.engine.timing import WordSpan
from koe.errors import AssetError
from koe.g2p.registry import G2PRegistry
from koe.languages import CODES
from koe.pipeline.speech import Speech
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, run_server
from support.fake import FakeEngine, FakeG2P, fake_voices
from support.warm import warm_app
from ws_events import audio, messages, of_type, receive, run, send, until

#: A language whose G2P this server "lacks" (its dependency is not installed).
MISSING = "hi"


class RecordingG2P(FakeG2P):
    """The fake G2P, noting each text it reads (per language, from worker threads)."""

    def __init__(self, lang: str, heard: list[tuple[str, str]], lock: threading.Lock) -> None:
        super().__init__(lang)
        self._heard = heard
        self._lock = lock

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        with self._lock:
            self._heard.append((self.lang, text))
        return super().phonemize_words(text)


class PartlyInstalled(G2PRegistry):
    def check(self, lang: str) -> None:
        if lang == MISSING:
            raise AssetError(f"lang {lang} needs espeak, which is not installed: `pip install x`",
                             code="language_unavailable")  # fmt: skip
        super().check(lang)


class Heard:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def langs(self) -> list[str]:
        with self.lock:
            return [lang for lang, _ in self.calls]

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()


@pytest.fixture(scope="module")
def heard() -> Heard:
    return Heard()


@pytest.fixture(scope="module")
def server(heard: Heard) -> Iterator[LiveServer]:
    g2p = {lang: RecordingG2P(lang, heard.calls, heard.lock) for lang in CODES}
    registry = PartlyInstalled.of(g2p)
    speech = Speech(FakeEngine(), fake_voices(), registry)
    # no segment cache: a text said again would be replayed, and these tests count which G2P reads each one
    settings = Settings(host=LOOPBACK, port=0, segment_cache_mb=0)
    with run_server(warm_app(settings, speech), settings) as live:
        yield live


@pytest.fixture()
def fresh(heard: Heard) -> Heard:
    heard.clear()
    return heard


def speak_ws(server: LiveServer, query: dict[str, str], frames: list[dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        url = server.ws_url + "/v1/stream" + ("?" + urlencode(query) if query else "")
        async with connect(url) as ws:
            for frame in frames:
                await send(ws, frame)
            return await until(ws, lambda m: m.get("type") in ("flushed", "synthesis_complete", "Flushed"))

    return run(main)


def test_the_voice_s_language_reads_its_text_and_the_config_ack_says_which(
    server: LiveServer, fresh: Heard
) -> None:
    events = speak_ws(server, {}, [{"type": "config", "voice": "jf_alpha"},
                                   {"type": "append", "text": "こんにちは。"},
                                   {"type": "flush"}])  # fmt: skip
    ack = messages(events)[0]
    assert ack["type"] == "config" and ack["lang"] == "ja"
    assert fresh.langs() == ["ja"] and audio(events)


def test_an_explicit_lang_overrides_the_voice_s_in_config(server: LiveServer, fresh: Heard) -> None:
    events = speak_ws(server, {}, [{"type": "config", "voice": "jf_alpha", "lang": "en-US"},
                                   {"type": "append", "text": "Hello there."},
                                   {"type": "flush"}])  # fmt: skip
    assert messages(events)[0]["lang"] == "en-us" and fresh.langs() == ["en-us"]


@pytest.mark.parametrize(
    ("query", "lang"),
    [({"voice": "ef_dora"}, "es"), ({"voice": "af_heart", "lang": "fr"}, "fr"),
     ({"voice": "pf_dora", "language": "it"}, "it")],
)  # fmt: skip
def test_the_connect_query_sets_the_language(
    server: LiveServer, fresh: Heard, query: dict[str, str], lang: str
) -> None:
    speak_ws(server, query, [{"type": "Speak", "text": "Hola amigo."}, {"type": "Flush"}])  # Deepgram dialect
    assert fresh.langs() == [lang]


def test_the_aws_sample_request_takes_a_voice_and_lang(server: LiveServer, fresh: Heard) -> None:
    speak_ws(server, {}, [{"text": "Olá, tudo bem?", "voice": "pf_dora"}])
    speak_ws(server, {}, [{"text": "你好。", "voice": "af_heart", "lang": "zh"}])
    assert fresh.langs() == ["pt-br", "zh"]


def test_invocations_speak_japanese_for_a_japanese_voice(server: LiveServer, fresh: Heard) -> None:
    response = httpx.post(
        server.http_url + "/invocations", json={"text": "こんにちは。", "voice": "jf_alpha"}
    )
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    assert len(response.content) > 1000 and fresh.langs() == ["ja"]
    body = {"text": "今天。", "voice": "jf_alpha", "lang": "zh", "stream": False}
    assert httpx.post(server.http_url + "/invocations", json=body).status_code == 200
    assert fresh.langs() == ["ja", "zh"]


def test_openai_speech_takes_any_koe_voice_and_a_lang(server: LiveServer, fresh: Heard) -> None:
    body = {"model": "kokoro", "input": "Bonjour !", "voice": "ff_siwis", "response_format": "wav"}
    assert httpx.post(server.http_url + "/v1/audio/speech", json=body).status_code == 200
    body |= {"voice": {"id": "if_sara"}, "lang": "es"}
    assert httpx.post(server.http_url + "/v1/audio/speech", json=body).status_code == 200
    assert fresh.langs() == ["fr", "es"]


@pytest.mark.parametrize(
    ("route", "body", "status", "code", "says"),
    [("/invocations", {"text": "Hi.", "lang": "ko"}, 400, "invalid_field", "lang must be one of"),
     ("/invocations", {"text": "Hi.", "voice": "jf_alpha+ef_dora"}, 400, "mixed_languages", "one language"),
     ("/invocations", {"text": "Hola こんにちは", "voice": "ef_dora"}, 400, "unsupported_script",
      "Japanese kana"),
     ("/invocations", {"text": "नमस्ते", "voice": "hf_alpha"}, 501, "language_unavailable", "pip install"),
     ("/v1/audio/speech", {"model": "kokoro", "input": "Hi.", "voice": "af_sky", "lang": 3}, 400,
      "invalid_field", "lang must be a string")],
)  # fmt: skip
def test_language_errors_are_clear_before_any_audio(
    server: LiveServer, route: str, body: dict[str, Any], status: int, code: str, says: str
) -> None:
    response = httpx.post(server.http_url + route, json=body)
    assert response.status_code == status
    error = response.json()
    error = error.get("error", error) if route.startswith("/v1") else error
    assert code in (error.get("code"), error.get("error")) and says in error["message"]


def test_on_a_websocket_language_errors_are_reported_and_the_session_goes_on(
    server: LiveServer, fresh: Heard
) -> None:
    async def main() -> list[Any]:
        async with connect(server.ws_url + "/v1/stream") as ws:
            replies = []
            for bad in ({"voice": "jf_alpha(1)+zf_xiaobei(1)"}, {"lang": "tlh"}, {"voice": "hm_omega"}):
                await send(ws, {"type": "config", **bad})
                replies.append(await receive(ws))
            await send(ws, {"type": "config", "voice": "ef_dora"})
            replies.append(await receive(ws))
            await send(ws, {"type": "append", "text": "Hola 안녕하세요."})
            await send(ws, {"type": "flush"})
            replies += await until(ws, of_type("flushed"))
            await send(ws, {"type": "append", "text": "Hola amigo."})
            await send(ws, {"type": "flush"})
            return replies + await until(ws, of_type("flushed"))

    replies = messages(run(main))
    errors = [m for m in replies if m["type"] == "error"]
    assert [e["code"] for e in errors] == [
        "mixed_languages",
        "invalid_field",
        "language_unavailable",
        "unsupported_script",
    ]
    assert "Korean hangul" in errors[-1]["message"]
    assert fresh.langs() == ["es"]  # the next turn was spoken


def test_every_voice_is_listed_with_its_language_and_gender(server: LiveServer) -> None:
    voices = httpx.get(server.http_url + "/v1/audio/voices").json()["voices"]
    assert len(voices) == 54
    by_id = {v["id"]: v for v in voices}
    assert by_id["jf_alpha"] == {"id": "jf_alpha", "name": "jf_alpha", "lang": "ja", "language": "Japanese",
                                 "gender": "female"}  # fmt: skip
    assert by_id["em_santa"]["lang"] == "es" and by_id["em_santa"]["gender"] == "male"
    assert {v["lang"] for v in voices} == set(CODES)
