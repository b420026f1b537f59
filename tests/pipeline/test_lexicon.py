"""Lexicons on the fake engine. The server's (``KOE_LEXICON``, JSON or TSV): a word it holds reaches the
engine with its phonemes, or its respelling as the G2P reads it, in any case and as a possessive, on every
transport; a caller's markup wins; a bad or huge file is a bounded error at load, a TSV one naming the line;
two lexicons never share cached audio. A caller's (a session's ``lexicon`` setting, a request's field):
consulted before the server's, respellings too, checked as the file is, a bad one refused saying why while
the session goes on."""

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


def _tsv(tmp_path: Path, text: str) -> Lexicon:
    path = tmp_path / "lexicon.tsv"
    path.write_text(text, encoding="utf-8")
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


def test_a_respelled_word_is_read_by_the_g2p_as_its_respelling_in_any_case_and_as_a_possessive(
    tmp_path: Path,
) -> None:
    speech = _speech(_lexicon(tmp_path, {"*": {"Nguyen": "=win", "koe": "=koh-eh"}}))
    assert speech.phonemize("NGUYEN and Nguyen's koe.") == ["win and wins koh eh."]  # "'" is no phoneme


def test_a_respelled_word_is_timed_as_the_word_written(tmp_path: Path) -> None:
    text = "Call Nguyen today."
    (piece,) = _speech(_lexicon(tmp_path, {"en-us": {"Nguyen": "=van der win"}})).phonemize_words(text)
    assert piece.phonemes == "call van der win today."
    timed = [
        (text[w.text_start : w.text_end], piece.phonemes[w.phoneme_start : w.phoneme_end])
        for w in piece.words
    ]
    assert timed == [("Call", "call"), ("Nguyen", "van der win"), ("today", "today")]


def test_a_tsv_file_holds_the_same_entries_as_the_json_one(tmp_path: Path) -> None:
    tsv = _tsv(
        tmp_path,
        "# language\tword\tphonemes or =respelling\n\n"
        "en-us\tkoe\tkˈOA\r\n*\tKokoro\t kˈOkəɹO \n  # indented comment\n*\tBass\tbˈæs\n*\tNguyen\t=win\n",
    )
    assert tsv.words == _lexicon(tmp_path, {**ENTRIES, "*": {**ENTRIES["*"], "Nguyen": "=win"}}).words


def test_a_tsv_field_is_split_at_tabs_only_and_never_unquoted(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="line 1: expected one word") as error:
        _tsv(tmp_path, '*\t"koe"\tkˈOA\n')
    assert error.value.code == "invalid_field"


@pytest.mark.parametrize(
    ("text", "says"),
    [("en-us\tkoe\n", "line 1: expected 3 tab-separated fields (language, word, phonemes or =respelling)"),
     ("# ok\n\nen-us koe kˈOA\n", "line 3: expected 3 tab-separated fields"),
     ("*\tkoe\tkˈOA\textra\n", "phonemes or =respelling), got 4: '*\\tkoe\\tkˈOA\\textra'"),
     ("tlh\tkoe\tkˈOA\n", "line 1: expected a language code"),
     ("*\ttwo words\ttˈu\n", "line 1: expected one word"),
     ("*\tkoe\t\n", "line 1: 'koe' must map to phonemes"),
     ("*\tkoe\tk☃\n", "line 1: 'koe' has phonemes outside Kokoro's alphabet: '☃' (U+2603)"),
     ("*\tkoe\t=k0e\n", "line 1: 'koe' must be respelled as letters"),
     ("*\tkoe\t=[koe](/kˈu/)\n", "line 1: 'koe' must be respelled as letters"),
     ("*\tkoe\t=\n", "line 1: 'koe' must be respelled as letters"),
     (f"*\tkoe\t={'a' * 51}\n", "line 1: 'koe' must be respelled as letters"),
     ("en-us\tkoe\tkˈOA\n#\nen-us\tKOE\tkˈu\n", "line 3: 'KOE' in 'en-us' is on line 1 already"),
     ("".join(f"*\tw{n}\twˈʌn\n" for n in range(MAX_ENTRIES + 1)), f"more than {MAX_ENTRIES}")],
)  # fmt: skip
def test_a_bad_tsv_line_is_refused_naming_it(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        _tsv(tmp_path, text)
    assert error.value.code == "invalid_field" and says in error.value.message


def test_a_bad_tsv_line_is_named_by_an_excerpt_of_bounded_length(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        _tsv(tmp_path, "x" * 100_000 + "\n")
    assert "line 1" in error.value.message and len(error.value.message) < 300


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
     ({"en-us": {"koe": "=k☃"}}, "must be respelled as letters"),
     ({"en-us": {f"w{n}": "wˈʌn" for n in range(MAX_ENTRIES + 1)}}, f"more than {MAX_ENTRIES}")],
)  # fmt: skip
def test_a_bad_lexicon_is_refused_saying_why(tmp_path: Path, entries: Any, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        _lexicon(tmp_path, entries)
    assert says in error.value.message


@pytest.mark.serial
@pytest.mark.parametrize("name", ["huge.json", "huge.tsv"])
def test_a_huge_lexicon_is_refused_before_it_is_read_and_before_the_model_loads(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
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


#: A caller's own: "koe" said otherwise than the server's lexicon says it, and words the server's lacks.
CALLERS = {"en-us": {"koe": "kˈu"}, "*": {"Stella": "stˈɛlɑ", "Nguyen": "=win"}}


def test_a_caller_s_lexicon_is_consulted_before_the_server_s(tmp_path: Path) -> None:
    speech = _speech(_lexicon(tmp_path))
    voice = speech.voice("af_heart", lexicon=CALLERS)
    pieces = speech.phonemize_words("Koe, Stella, Nguyen and Kokoro.", voice.lang, lexicon=voice.lexicon)
    assert [piece.phonemes for piece in pieces] == ["kˈu, stˈɛlɑ, win and kˈOkəɹO."]


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
    body = {"model": "kokoro", "input": "Call Stella, Nguyen.", "voice": "af_heart", "response_format": "pcm"}
    assert (
        httpx.post(live.http_url + "/v1/audio/speech", json={**body, "lexicon": CALLERS}).status_code == 200
    )
    assert "call stˈɛlɑ, win." in engine.worked
    refused = httpx.post(live.http_url + "/v1/audio/speech", json={**body, "lexicon": {"en-us": {"a": "☃"}}})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "lexicon"

    async def main() -> list[Any]:
        async with connect(live.ws_url + "/v1/stream?voice=af_heart") as ws:
            await send(ws, {"type": "config", "lexicon": CALLERS})
            await send(ws, {"type": "config", "lexicon": {"en-us": ["not", "words"]}})  # refused: kept
            await send(ws, {"type": "append", "text": "Hello koe and Nguyen."})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    replies = messages(run(main))
    assert [m["code"] for m in replies if m["type"] == "error"] == ["invalid_field"]
    assert "hello kˈu and win." in engine.worked  # the session's lexicon over the server's kˈOA
