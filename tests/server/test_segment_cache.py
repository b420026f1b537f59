"""The segment cache through a live server: metrics, sessions sharing it, cancelling a replay, pre-warming
after ``/ping`` is 200 at the lowest priority; on the fake engine, and one hit end to end on the model."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect

from koe.app import create_app
from koe.engine.base import SynthesisRequest
from koe.engine.timing import SegmentTiming
from koe.errors import ConfigError
from koe.pipeline.precache import BUILTIN_OPENERS, MAX_OPENERS, parse_openers
from koe.pipeline.seams import trim
from koe.pipeline.speech import Speech
from koe.settings import Settings
from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine
from ws_events import Event, audio, messages, of_type, run, send, until

OPENER = "Sure, I can help with that."
_WAIT_S = 60.0


def cache_metrics(live: LiveServer) -> dict[str, float]:
    """The ``koe_segment_cache_*`` samples, by name (lookups by their result)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(live.http_url + "/metrics").text):
        for sample in family.samples:
            if sample.name.startswith("koe_segment_cache"):
                result = sample.labels.get("result")
                found[sample.name + (f"_{result}" if result else "")] = sample.value
    return found


async def speak(live: LiveServer, text: str, voice: str = "af_heart") -> list[Event]:
    async with connect(live.ws_url + f"/v1/stream?voice={voice}") as ws:
        await send(ws, {"type": "append", "text": text})
        await send(ws, {"type": "flush"})
        return await until(ws, of_type("flushed"))


def timed(events: list[Event]) -> list[tuple[object, ...]]:
    """Each word and when it is heard (its source span depends on the turn's text)."""
    return [
        (w["word"], w["start_s"], w["end_s"])
        for m in messages(events)
        if m["type"] == "words"
        for w in m["words"]
    ]


def test_hits_misses_and_bytes_are_in_the_metrics(serve_fake: ServerFactory) -> None:
    engine = FakeEngine()
    with serve_fake(engine, segment_cache_mb=4) as live:
        assert cache_metrics(live)["koe_segment_cache_capacity_bytes"] == 4 * 2**20
        first = run(lambda: speak(live, OPENER))
        calls = engine.calls
        second = run(lambda: speak(live, "  " + OPENER.replace(" ", "  ")))
        metrics = cache_metrics(live)
    assert engine.calls == calls  # the second turn never reached the engine
    assert audio(second) == audio(first) and timed(second) == timed(first)
    assert metrics["koe_segment_cache_lookups_total_hit"] == 1
    assert metrics["koe_segment_cache_lookups_total_miss"] == 1
    assert metrics["koe_segment_cache_stores_total"] == 1
    assert metrics["koe_segment_cache_entries"] == 1
    assert len(audio(first)) * 2 < metrics["koe_segment_cache_bytes"] < len(audio(first)) * 2 + 4096


def test_a_disabled_cache_synthesizes_every_turn(serve_fake: ServerFactory) -> None:
    engine = FakeEngine()
    with serve_fake(engine, segment_cache_mb=0) as live:
        run(lambda: speak(live, OPENER))
        calls = engine.calls
        run(lambda: speak(live, OPENER))
        metrics = cache_metrics(live)
    assert engine.calls == 2 * calls
    assert metrics["koe_segment_cache_lookups_total_hit"] == metrics["koe_segment_cache_entries"] == 0


def test_evictions_keep_the_cache_within_its_bound(serve_fake: ServerFactory) -> None:
    with serve_fake(segment_cache_mb=2) as live:  # ~20 s of audio, one entry at most an eighth of it

        async def many() -> None:
            async with connect(live.ws_url + "/v1/stream") as ws:
                for n in range(40):
                    await send(ws, {"type": "append", "text": f"Answer number {n} is here."})
                    await send(ws, {"type": "flush"})
                    await until(ws, of_type("flushed"))

        run(many)
        metrics = cache_metrics(live)
    assert metrics["koe_segment_cache_evictions_total"] > 0
    assert metrics["koe_segment_cache_bytes"] <= 2 * 2**20
    assert metrics["koe_segment_cache_stores_total"] == 40


def test_two_sessions_asking_for_the_same_new_segment_at_once_both_hear_it_whole(
    serve_fake: ServerFactory,
) -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)
    with serve_fake(engine, segment_cache_mb=4) as live:

        async def both() -> tuple[list[Event], list[Event]]:
            turns = [asyncio.create_task(speak(live, OPENER)) for _ in range(2)]
            async with asyncio.timeout(_WAIT_S):
                while engine.calls < 2:  # noqa: ASYNC110  # both are synthesizing, neither is cached yet
                    await asyncio.sleep(0.01)
            gate.set()
            first, second = await asyncio.gather(*turns)
            return first, second

        first, second = run(both)
        third = run(lambda: speak(live, OPENER))
        metrics = cache_metrics(live)
    assert audio(first) == audio(second) == audio(third) and audio(first)
    assert timed(first) == timed(second) == timed(third)
    assert metrics["koe_segment_cache_stores_total"] == 1 and metrics["koe_segment_cache_entries"] == 1
    assert metrics["koe_segment_cache_lookups_total_hit"] == 1


def test_a_replayed_segment_streams_at_once_and_a_cancel_ends_it_like_any_other(
    serve_fake: ServerFactory,
) -> None:
    engine = FakeEngine()
    with serve_fake(engine, segment_cache_mb=4) as live:
        whole = run(lambda: speak(live, OPENER))
        engine.gate = threading.Event()  # from now on nothing new can be synthesized

        async def cancelled() -> tuple[list[Event], list[Event]]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": OPENER + " And then more."})
                await send(ws, {"type": "flush"})
                heard = await until(ws, of_type("segment_end"))  # the replayed opener, whole
                await send(ws, {"type": "cancel"})
                heard += await until(ws, of_type("cancelled"))
                await send(ws, {"type": "append", "text": OPENER})
                await send(ws, {"type": "flush"})
                return heard, await until(ws, of_type("flushed"))

        try:
            heard, after = run(cancelled)
        finally:
            engine.gate.set()
    assert audio(heard) == audio(whole)
    assert [m["type"] for m in messages(heard)] == ["segment", "words", "segment_end", "cancelled"]
    assert audio(after) == audio(whole) and timed(after) == timed(whole)


class Recording(FakeEngine):
    """Records which phonemes each engine call was for, in the order the workers ran them."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(gate=gate)
        self.order: list[str] = []

    def work(self, request: SynthesisRequest, cancel: threading.Event | None = None) -> bool:
        self.order.append(request.phonemes)
        return super().work(request, cancel)


def test_pre_warming_starts_after_ping_is_200_and_yields_to_live_turns(serve_fake: ServerFactory) -> None:
    gate = threading.Event()
    engine = Recording(gate)
    with serve_fake(engine, segment_cache_mb=8, precache="builtin", workers=1) as live:
        assert httpx.get(live.http_url + "/ping").status_code == 200  # ready while warming is held
        deadline = time.monotonic() + _WAIT_S
        while not engine.order and time.monotonic() < deadline:
            time.sleep(0.01)  # the first opener is on the one worker, held by the gate

        async def live_turn() -> list[Event]:
            turn = asyncio.create_task(speak(live, "A live question comes in."))
            async with asyncio.timeout(_WAIT_S):
                while live.call(lambda: live.runtime.scheduler.stats.queued) < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            gate.set()
            return await turn

        heard = run(live_turn)
        while cache_metrics(live)["koe_segment_cache_stores_total"] < len(BUILTIN_OPENERS):
            assert time.monotonic() < deadline, "pre-warming did not finish"
            time.sleep(0.05)
        hit = run(lambda: speak(live, "Let me check that for you. It takes a second."))
        metrics = cache_metrics(live)
    assert audio(heard)
    assert "live" in engine.order[1]  # the live turn ran next, before the second opener
    assert metrics["koe_segment_cache_lookups_total_hit"] == 1 and messages(hit)


def test_a_precache_file_names_openers_per_voice(tmp_path: Path, serve_fake: ServerFactory) -> None:
    path = tmp_path / "openers.json"
    path.write_text(json.dumps({"bf_emma": ["Right, let me see."], "af_bella(2)+af_sky": ["Hello!"]}))
    with serve_fake(segment_cache_mb=8, precache=str(path)) as live:
        deadline = time.monotonic() + _WAIT_S
        while cache_metrics(live)["koe_segment_cache_stores_total"] < 2:
            assert time.monotonic() < deadline, "pre-warming did not finish"
            time.sleep(0.02)
        run(lambda: speak(live, "Right, let me see. Then more.", voice="bf_emma"))
        run(lambda: speak(live, "Right, let me see. Then more.", voice="af_heart"))  # another voice: a miss
        assert cache_metrics(live)["koe_segment_cache_lookups_total_hit"] == 1


#: Openers whose first segment is cut by their own language's rules and lengths (cut as English text, each
#: would be a shorter segment that no turn in that voice ever says).
_FOREIGN_OPENERS = {"zf_xiaobei": "没问题，请稍等一下。", "hf_alpha": "ठीक है, मैं आपकी मदद कर सकता हूँ।"}


def test_a_pre_warmed_opener_in_another_language_is_cut_as_that_language_s_turns_are(
    tmp_path: Path, serve_fake: ServerFactory
) -> None:
    path = tmp_path / "openers.json"
    path.write_text(json.dumps({voice: [text] for voice, text in _FOREIGN_OPENERS.items()}))
    with serve_fake(segment_cache_mb=8, precache=str(path)) as live:
        deadline = time.monotonic() + _WAIT_S
        while cache_metrics(live)["koe_segment_cache_stores_total"] < len(_FOREIGN_OPENERS):
            assert time.monotonic() < deadline, "pre-warming did not finish"
            time.sleep(0.02)
        for voice, text in _FOREIGN_OPENERS.items():
            run(lambda voice=voice, text=text: speak(live, text, voice=voice))
        assert cache_metrics(live)["koe_segment_cache_lookups_total_hit"] == len(_FOREIGN_OPENERS)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "is not JSON"),
        ("[1, 2]", "expected an object"),
        ('{"af_heart": "Sure."}', "list of non-empty strings"),
        ('{"af_heart": [""]}', "list of non-empty strings"),
        ('{"../etc": ["Sure."]}', "malformed voice"),
        ('{"ef_dora": ["Hola."], "af_heart": ["Sure.", "はい、どうぞ。"]}', "'af_heart'.*Japanese kana"),
        (json.dumps({"af_heart": ["Sure."] * (MAX_OPENERS + 1)}), f"at most {MAX_OPENERS}"),
    ],
)
def test_a_bad_precache_file_stops_the_server_at_start_saying_why(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "openers.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=problem):
        create_app(Settings(precache=str(path)))
    with pytest.raises(ConfigError, match="cannot be read"):
        parse_openers(str(tmp_path / "missing.json"), "af_heart")


def test_the_built_in_openers_are_for_the_default_voice() -> None:
    assert parse_openers("builtin", "bm_george") == {"bm_george": BUILTIN_OPENERS}
    assert parse_openers(None, "af_heart") == {}


#: One sentence long enough (over 80 frames) for the first segment to be decoded in windows.
LONG = "Please call Stella and ask her to bring these things with her from the store."


def test_a_windowed_opener_said_again_is_replayed_as_sent_over_http(serve_fake: ServerFactory) -> None:
    """Over HTTP the whole text and its end arrive together, so both requests cut the same segments; over
    the WebSocket an ``append`` may be cut before its ``flush`` arrives (the real-model test below covers
    that path with an opener followed by different text)."""
    engine = FakeEngine()
    body = {"text": LONG, "format": "pcm", "stream": True}
    with serve_fake(engine, segment_cache_mb=4) as live:
        first = httpx.post(live.http_url + "/invocations", json=body, timeout=_WAIT_S)
        calls = engine.calls
        second = httpx.post(live.http_url + "/invocations", json=body, timeout=_WAIT_S)
        metrics = cache_metrics(live)
    assert calls > 2  # the first request's segment was decoded in windows: several engine calls
    assert engine.calls == calls  # the second request did not reach the engine
    assert first.status_code == second.status_code == 200 and second.content == first.content
    assert metrics["koe_segment_cache_lookups_total_hit"] == 1


def test_a_repeated_windowed_opener_is_heard_from_the_cache_as_it_was_sent_on_the_real_model(
    speech: Speech, serve_app: ServerFactory
) -> None:
    opener = "Sure, I can help you reset your password and get back into your account in minutes."
    speech.engine.prepare(speech.voices.resolve("af_heart"))  # calibrated, so the first segment windows
    with serve_app(segment_cache_mb=16) as live:
        first = run(lambda: speak(live, opener + " The rest differs."))
        second = run(lambda: speak(live, opener + " Something else now."))
        metrics = cache_metrics(live)
    heard, again = (_first_segment_pcm(events, opener) for events in (first, second))
    # what was sent, less the lead the windowed decode kept to cover its first window (a whole decode's)
    (phonemes,) = speech.phonemize(opener)
    timing = next(speech.engine.stream(SynthesisRequest(phonemes, speech.voices.resolve("af_heart"))))
    assert isinstance(timing, SegmentTiming)
    lead = trim(timing).start - trim(timing, keep_lead=True).start
    assert lead > 0 and again == heard[2 * lead :]
    assert metrics["koe_segment_cache_lookups_total_hit"] == 1


def _first_segment_pcm(events: list[Event], text: str) -> bytes:
    """The first segment's audio, once it is checked to be ``text``."""
    assert next(m["text"] for m in messages(events) if m["type"] == "segment") == text
    end = next(m for m in messages(events) if m["type"] == "segment_end")
    return audio(events)[: round(end["duration_s"] * 24_000) * 2]  # pcm_s16le
