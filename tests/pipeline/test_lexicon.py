"""Lexicons on the fake engine. The server's (``KOE_LEXICON``): a word it holds reaches the engine with its
phonemes in any case and as a possessive, on every transport; a caller's markup wins; a bad or huge file is
a bounded error at load; two lexicons never share cached audio. A caller's (a session's ``lexicon``
setting, a request's field): consulted before the server's, checked as the file is, a bad one refused
saying why while the session goes on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.app import create_app
from koe.errors import ConfigError
from koe.languages import CODES
from koe.pipeline.cache import segment_key
from koe.pipeline.lexicon import MAX_CALLER_ENTRIES, MAX_ENTRIES, MAX_LEXICON_BYTES, Lexicon, load_lexicon
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, run_server
from support.fake import FakeEngine, FakeG2P, fake_voices
from ws_events import messages, of_type, run, send, until

ENTRIES = {"en-us": {"koe": "kˈOA"}, "*": {"Kokoro": "kˈOkəɹO", "Bass": "bˈæs"}}
#: Refusing a file over the limit reads none of it: well under this.
BOUNDED_S = 0.5


def _lexicon(tmp_path: Path, entries: Any = ENTRIES) -> Lexicon:
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return load_lexicon(path)


def _speech(lexicon: Lexicon, engine: FakeEngine | None = None) -> Speech:
    g2p = {lang: FakeG2P(lang) for lang in CODES}
    return Speech(engine or FakeEngine(), fake_voices(), g2p, lexicon=lexicon)


def test_a_word_in_the_lexicon_gets_its_phonemes_in_any_case_and_as_a_possessive(tmp_path: Path) -> None:
    speech = _speech(_lexicon(tmp_path))
    assert speech.phonemize("Koe and KOKORO's voice, the bass's note.") == [
        "kˈOA and kˈOkəɹOz voice, the bˈæsɪz note."
    ]
    assert speech.phonemize("Koe and Kokoro.", "es") == ["koe and kˈOkəɹO."]  # koe is American English only


def test_the_caller_s_markup_wins_over_the_lexicon(tmp_path: Path) -> None:
    assert _speech(_lexicon(tmp_path)).phonemize("Say [koe](/kˈu/) and koe.") == ["say kˈu and kˈOA."]


def test_two_lexicons_never_share_a_segment_s_cached_audio(tmp_path: Path) -> None:
    one = _speech(_lexicon(tmp_path))
    other = _speech(_lexicon(tmp_path, {"en-us": {"koe": "kˈu"}}))
    assert one.identity != other.identity


@pytest.mark.parametrize(
    ("entries", "says"),
    [(["koe"], "JSON object"),
     ({"tlh": {"koe": "kˈOA"}}, "language code"),
     ({"en-us": ["koe"]}, "object of words"),
     ({"en-us": {"two words": "tˈu"}}, "one word"),
     ({"en-us": {"koe": ""}}, "phonemes"),
     ({"en-us": {"koe": "k☃"}}, "'☃' (U+2603)"),
     ({"en-us": {f"w{n}": "wˈʌn" for n in range(MAX_ENTRIES + 1)}}, f"more than {MAX_ENTRIES}")],
)  # fmt: skip
def test_a_bad_lexicon_is_refused_saying_why(tmp_path: Path, entries: Any, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        _lexicon(tmp_path, entries)
    assert says in error.value.message


@pytest.mark.serial
def test_a_huge_lexicon_is_refused_before_it_is_read_and_before_the_model_loads(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    path.write_bytes(b" " * (10 * MAX_LEXICON_BYTES))  # 10 MiB
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="at most"):
        Speech.load(SpeechOptions(lexicon=path))
    assert time.perf_counter() - started < BOUNDED_S


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, FakeEngine]]:
    engine = FakeEngine()
    speech = _speech(_lexicon(tmp_path_factory.mktemp("lexicon")), engine)
    settings = Settings(host=LOOPBACK, port=0, segment_cache_mb=0)
    with run_server(create_app(settings, speech), settings) as live:
        yield live, engine


def test_the_lexicon_holds_on_the_http_routes_and_the_websocket(
    served: tuple[LiveServer, FakeEngine],
) -> None:
    live, engine = served
    body = {"model": "kokoro", "input": "Hello koe.", "voice": "af_heart", "response_format": "pcm"}
    assert httpx.post(live.http_url + "/v1/audio/speech", json=body).status_code == 200
    assert "hello kˈOA." in engine.worked

    async def main() -> None:
        async with connect(live.ws_url + "/v1/stream?voice=af_heart") as ws:
            await send(ws, {"type": "append", "text": "Thanks, Kokoro."})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("flushed"))

    run(main)
    assert "thanks, kˈOkəɹO." in engine.worked


#: A caller's own: "koe" said otherwise than the server's lexicon says it, and a word the server's lacks.
CALLERS = {"en-us": {"koe": "kˈu"}, "*": {"Stella": "stˈɛlɑ"}}


def test_a_caller_s_lexicon_is_consulted_before_the_server_s(tmp_path: Path) -> None:
    speech = _speech(_lexicon(tmp_path))
    voice = speech.voice("af_heart", lexicon=CALLERS)
    pieces = speech.phonemize_words("Koe, Stella and Kokoro.", voice.lang, lexicon=voice.lexicon)
    assert [piece.phonemes for piece in pieces] == ["kˈu, stˈɛlɑ and kˈOkəɹO."]


def test_two_callers_lexicons_never_share_a_segment_s_cached_audio(tmp_path: Path) -> None:
    speech = _speech(_lexicon(tmp_path))
    keys = {
        segment_key(speech.identity, speech.voice("af_heart", lexicon=lexicon), "Hello koe.")
        for lexicon in (None, CALLERS, {"en-us": {"koe": "kˈOI"}})
    }
    assert len(keys) == 3


@pytest.mark.parametrize(
    ("entries", "says"),
    [({"tlh": {"koe": "kˈOA"}}, "language code"),
     ({"en-us": {"koe": "k☃"}}, "'☃' (U+2603)"),
     ({"*": {f"w{n}": "wˈʌn" for n in range(MAX_CALLER_ENTRIES + 1)}}, f"more than {MAX_CALLER_ENTRIES}")],
)  # fmt: skip
def test_a_bad_caller_s_lexicon_is_refused_saying_why(tmp_path: Path, entries: Any, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        _speech(_lexicon(tmp_path)).voice("af_heart", lexicon=entries)
    assert error.value.code == "invalid_field" and says in error.value.message


def test_a_session_s_and_a_request_s_lexicon_reach_the_engine_and_a_bad_one_is_refused(
    served: tuple[LiveServer, FakeEngine],
) -> None:
    live, engine = served
    body = {"model": "kokoro", "input": "Call Stella.", "voice": "af_heart", "response_format": "pcm"}
    assert (
        httpx.post(live.http_url + "/v1/audio/speech", json={**body, "lexicon": CALLERS}).status_code == 200
    )
    assert "call stˈɛlɑ." in engine.worked
    refused = httpx.post(live.http_url + "/v1/audio/speech", json={**body, "lexicon": {"en-us": {"a": "☃"}}})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "lexicon"

    async def main() -> list[Any]:
        async with connect(live.ws_url + "/v1/stream?voice=af_heart") as ws:
            await send(ws, {"type": "config", "lexicon": CALLERS})
            await send(ws, {"type": "config", "lexicon": {"en-us": ["not", "words"]}})  # refused: kept
            await send(ws, {"type": "append", "text": "Hello koe."})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    replies = messages(run(main))
    assert [m["code"] for m in replies if m["type"] == "error"] == ["invalid_field"]
    assert "hello kˈu." in engine.worked  # the session's lexicon over the server's kˈOA
