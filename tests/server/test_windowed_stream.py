"""Windowed decoding in the server (``Settings.windowed``): a segment is a chain of one-window jobs whose
audio goes out in parts, interleaved with other sessions' jobs by deadline, and cancelled within a window.

The server runs on the scripted fake engine, which decodes in windows of a fixed size, each taking a little
time, and has one worker, so that one session's long segment could only hold back another session's first
audio if it ran as one job. (The real decoder's windows are tested in tests/engine/onnx.)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from koe.engine.onnx.windowing import MIN_WINDOWED_FRAMES
from koe.engine.timing import FRAME_SAMPLES
from koe.scheduler.queue import SchedulerStats
from koe.types import SAMPLE_RATE
from live_checks import wait_for
from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine, fake_seconds, fake_speech
from ws_events import WAIT_S, Event, audio, messages, of_type, receive, run, send, shape, until

VOICE = "af_heart"
#: 26 words and no comma: the first segment of a turn ends at a sentence end or a comma, so this is one.
LONG = (
    "Please call Stella and ask her to bring these things with her from the store because we will need "
    "them for the party on Saturday night."
)
#: Two segments, each long enough for several windows.
TWO_SENTENCES = (
    "Please call Stella and ask her to bring these things with her. "
    "She can scoop these things into three red bags for us."
)
PCM_BYTES_PER_S = 24_000 * 2


#: Each window takes this long on the fake engine, so a long segment spans many scheduler jobs.
WINDOW_DELAY_S = 0.02
#: Each engine call of a test where another turn's work must still be on the engine when a segment is cut.
OTHER_CALL_S = 0.2


@pytest.fixture(scope="module")
def windowed_server(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """A one-worker server with windowed decoding on the fake engine."""
    with serve_fake(
        FakeEngine(delay_s=WINDOW_DELAY_S), windowed=True, workers=1, default_voice=VOICE
    ) as live:
        yield live


def _stats(live: LiveServer) -> SchedulerStats:
    return live.call(lambda: live.runtime.scheduler.stats)


def _whole_samples(text: str) -> int:
    """The samples of ``text`` decoded whole."""
    return fake_speech().synthesize(text, voice=VOICE).size


def _wait_idle(live: LiveServer) -> SchedulerStats:
    wait_for(lambda: not _stats(live).running and not _stats(live).queued, "the scheduler to be idle")
    return _stats(live)


async def _first_audio(ws: ClientConnection) -> list[Event]:
    """Events up to and including the first audio frame."""
    events: list[Event] = []
    while not events or not isinstance(events[-1], bytes):
        events.append(await receive(ws))
    return events


def test_a_long_segment_goes_out_in_parts_as_long_as_its_whole_decode(
    windowed_server: LiveServer,
) -> None:
    """The text comes whole, in one request (an ``append`` and its ``flush`` are two frames: read apart, the
    first segment of streamed text is cut before its end), so it is one segment, decoded in windows."""

    async def main() -> list[Event]:
        async with connect(windowed_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"text": LONG, "words": True})
            return await until(ws, of_type("synthesis_complete"))

    before = _stats(windowed_server)
    events = run(main)
    jobs = _stats(windowed_server).completed - before.completed
    assert shape(events) == ["synthesis_start", "words", "audio", "synthesis_complete"]
    _start, words, complete = messages(events)
    assert [w["word"] for w in words["words"]] == re.findall(r"[A-Za-z]+", LONG)
    samples = len(audio(events)) // 2
    assert samples == _whole_samples(LONG)
    assert complete["total_duration_s"] == round(samples / 24_000, 3)
    assert jobs >= 3  # G2P, stage A and the leading silence; then at least two windows


def test_a_cancel_in_a_long_segment_stops_it_within_a_window_and_the_session_goes_on(
    windowed_server: LiveServer,
) -> None:
    async def main() -> tuple[list[Event], SchedulerStats, SchedulerStats, list[Event]]:
        async with connect(windowed_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": LONG})
            await send(ws, {"type": "flush"})
            heard = await _first_audio(ws)
            await send(ws, {"type": "cancel"})
            heard += await until(ws, of_type("cancelled"))
            at_cancel = _stats(windowed_server)
            idle = await asyncio.to_thread(_wait_idle, windowed_server)
            await send(ws, {"type": "append", "text": "Still here."})
            await send(ws, {"type": "flush"})
            return heard, at_cancel, idle, await until(ws, of_type("flushed"))

    heard, at_cancel, idle, after = run(main)
    assert len(audio(heard)) // 2 < _whole_samples(LONG)
    # nothing of the cancelled segment completed after the cancel: at most its window in progress ran
    # on and was thrown away, and no further window was queued
    assert idle.completed == at_cancel.completed
    assert (idle.discarded + idle.dropped) - (at_cancel.discarded + at_cancel.dropped) <= 1
    assert shape(after) == ["segment", "words", "audio", "segment_end", "flushed"]  # no stale audio first
    assert messages(after)[-1]["turn"] == 1 and messages(after)[-1]["audio_s"] > 0.3


def test_another_sessions_first_audio_comes_between_the_windows_of_a_long_segment(
    windowed_server: LiveServer,
) -> None:
    order: list[str] = []

    async def listen(ws: ClientConnection, name: str) -> None:
        while True:
            event = await receive(ws)
            if isinstance(event, bytes):
                if f"{name} audio" not in order:
                    order.append(f"{name} audio")
            elif event["type"] == "segment_end":
                order.append(f"{name} segment_end")
            elif event["type"] == "flushed":
                return

    async def main() -> None:
        async with (
            connect(windowed_server.ws_url + "/v1/stream") as first,
            connect(windowed_server.ws_url + "/v1/stream") as second,
        ):
            await send(first, {"type": "append", "text": LONG})
            await send(first, {"type": "flush"})
            await _first_audio(first)  # the long segment is being decoded now, on the only worker
            order.append("first audio")
            await send(second, {"type": "append", "text": "Hi there."})
            await send(second, {"type": "flush"})
            async with asyncio.timeout(WAIT_S):
                await asyncio.gather(listen(first, "first"), listen(second, "second"))

    run(main)
    assert order.index("second audio") < order.index("first segment_end")


def test_streamed_http_speech_comes_in_parts_with_words_on_the_response_clock(
    windowed_server: LiveServer,
) -> None:
    text = TWO_SENTENCES
    body = {
        "model": "kokoro",
        "input": text,
        "voice": VOICE,
        "response_format": "pcm",
        "stream_format": "sse",
        "timestamps": True,
    }
    response = httpx.post(windowed_server.http_url + "/v1/audio/speech", json=body, timeout=WAIT_S)
    assert response.status_code == 200
    events: list[dict[str, Any]] = [
        json.loads(block.removeprefix("data: ")) for block in response.text.split("\n\n") if block
    ]
    assert events[-1] == {"type": "speech.audio.done"}
    kinds = [e["type"] for e in events[:-1]]
    # one words event per segment, then that segment's audio in more than one part
    assert kinds[0] == "speech.words" and kinds.count("speech.words") == 2
    second = kinds.index("speech.words", 1)
    assert kinds[1:second].count("speech.audio.delta") >= 2
    assert kinds[second + 1 :].count("speech.audio.delta") >= 2
    offset_s = sum(len(base64.b64decode(e["audio"])) for e in events[1:second]) / PCM_BYTES_PER_S
    total_s = sum(len(base64.b64decode(e["audio"])) for e in events[:-1] if "audio" in e) / PCM_BYTES_PER_S
    first_words, second_words = events[0]["words"], events[second]["words"]
    assert [w["word"] for w in first_words + second_words] == re.findall(r"[A-Za-z]+", text)
    assert first_words[-1]["end_s"] <= offset_s <= second_words[0]["start_s"]
    assert second_words[-1]["end_s"] <= total_s


def _sse_kinds(live: LiveServer, text: str) -> list[str]:
    """The event types of a streamed OpenAI speech request with word timestamps."""
    body = {"model": "kokoro", "input": text, "voice": VOICE, "response_format": "pcm",
            "stream_format": "sse", "timestamps": True}  # fmt: skip
    response = httpx.post(live.http_url + "/v1/audio/speech", json=body, timeout=WAIT_S)
    assert response.status_code == 200
    return [
        json.loads(block.removeprefix("data: "))["type"] for block in response.text.split("\n\n") if block
    ]


@pytest.mark.parametrize("windowed_first", [True, False])
def test_by_default_a_later_segment_that_is_in_time_decodes_whole(
    serve_fake: ServerFactory, windowed_first: bool
) -> None:
    """The first segment leaves the listener ~8 s of audio: the next one, long enough to window, is in time
    decoded whole, and so it is (in one part)."""
    later = TWO_SENTENCES.split(". ")[1]
    with serve_fake(
        FakeEngine(delay_s=WINDOW_DELAY_S), workers=1, default_voice=VOICE, windowed_first=windowed_first
    ) as live:
        kinds = _sse_kinds(live, f"{LONG} {later}")
    # audio parts per segment (each segment's words event comes before its audio)
    parts = [len(block.split()) for block in " ".join(kinds[:-1]).split("speech.words")[1:]]
    assert len(parts) >= 2
    assert (parts[0] >= 2) if windowed_first else (parts[0] == 1)
    assert set(parts[1:]) == {1}


@pytest.mark.parametrize("windowed_first", [True, False])
def test_a_later_segment_that_would_be_late_decoded_whole_decodes_in_windows(
    serve_fake: ServerFactory, windowed_first: bool
) -> None:
    """Streamed, a short first segment leaves the listener ~1 s of audio when a long one follows: decoded
    whole, that one would come after the first ran out, so it decodes in windows (several jobs, its first
    audio after stage A and one window) — unless the server decodes every later segment whole."""
    opener = "Sure, here's how. "
    with serve_fake(
        FakeEngine(delay_s=WINDOW_DELAY_S), workers=1, default_voice=VOICE, windowed_first=windowed_first
    ) as live:

        async def main() -> list[Event]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": opener})
                events = await until(ws, of_type("segment_end"))  # the opener is spoken and sent
                await send(ws, {"type": "append", "text": LONG})
                await send(ws, {"type": "flush"})
                return events + await until(ws, of_type("flushed"))

        before = _stats(live).completed
        events = run(main)
        jobs = _wait_idle(live).completed - before
    segments = [m["text"] for m in messages(events) if m["type"] == "segment"]
    assert segments[0] == opener.strip() and " ".join(segments[1:]) == LONG
    assert len(audio(events)) // 2 == sum(_whole_samples(text) for text in segments)  # as if decoded whole
    assert jobs > len(segments) if windowed_first else jobs == len(segments)  # a segment whole is one job


@pytest.mark.parametrize(
    ("workers", "windows"),
    [pytest.param(1, False, id="the_other_fills_every_worker"), pytest.param(2, True, id="a_worker_is_free")],
)
def test_a_late_segment_decodes_whole_while_other_turns_fill_every_worker(
    serve_fake: ServerFactory, workers: int, windows: bool
) -> None:
    """Another turn keeps one job on the engine while a late segment is cut. With one worker that job fills
    every worker: a window would wait behind a whole decode before each of its steps, and its listener
    starve while the other's does not, so the late segment is decoded whole (one call). With two, a worker
    is left free, and the late segment decodes in windows as it would alone (a call per window)."""
    opener = "Sure, here's how. "
    other = (
        "This is the other turn and its first sentence keeps the engine busy for a while. "
        "This is its second sentence and it is about as long as the first one was."
    )
    engine = FakeEngine(delay_s=OTHER_CALL_S)
    with serve_fake(engine, workers=workers, default_voice=VOICE) as live:
        url = live.http_url + "/v1/audio/speech"
        body = {"model": "tts-1", "input": other, "voice": VOICE, "response_format": "wav"}

        async def main() -> list[Event]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": opener})
                events = await until(ws, of_type("segment_end"))  # the opener is spoken and sent
                request = asyncio.create_task(asyncio.to_thread(httpx.post, url, json=body, timeout=WAIT_S))
                await asyncio.to_thread(wait_for, lambda: _stats(live).running > 0, "the other turn's work")
                await send(ws, {"type": "append", "text": LONG})
                await send(ws, {"type": "flush"})
                events += await until(ws, of_type("flushed"))
                assert (await request).status_code == 200
                return events

        events = run(main)
    segments = [m["text"] for m in messages(events) if m["type"] == "segment"]
    assert segments[0] == opener.strip() and " ".join(segments[1:]) == LONG
    # the first later segment was cut with only the opener's second of audio before the listener, while the
    # other turn's work ran: decoded whole, it would come late
    late = segments[1]
    assert fake_seconds(late) >= MIN_WINDOWED_FRAMES * FRAME_SAMPLES / SAMPLE_RATE  # long enough to window
    (phonemes,) = fake_speech().phonemize(late)
    calls = engine.worked.count(phonemes)
    assert (calls > 1) is windows, f"the late segment took {calls} engine calls"


def test_a_complete_body_is_cut_where_the_text_ends_its_phrases_not_shortened_for_an_early_start(
    serve_fake: ServerFactory,
) -> None:
    """Streamed, the first segment is cut short (the listener waits for it); in one complete body nobody
    does, so the segments are the text's own and the audio what the text spoken in one go makes."""
    with serve_fake(workers=1, default_voice=VOICE, windowed_first=False) as live:

        def jobs(stream: bool) -> int:
            before = _stats(live).completed
            body = {"text": LONG, "voice": VOICE, "stream": stream, "format": "pcm"}
            response = httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S)
            assert response.status_code == 200
            assert len(response.content) // 2 > 0
            return _wait_idle(live).completed - before

        assert jobs(stream=True) >= 2
        assert jobs(stream=False) == 1


#: A first sentence too short to window, then two that are not.
WHOLE_ANSWER = (
    "Sure, here's how. Please call Stella and ask her to bring these things with her from the store. "
    "She can scoop these things into three red bags for us."
)


def _segments(live: LiveServer, text: str) -> list[dict[str, Any]]:
    """The segment messages of one turn of ``text``, sent whole."""

    async def main() -> list[Event]:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": text})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    return [m for m in messages(run(main)) if m["type"] == "segment"]


def test_a_whole_texts_first_segment_too_short_to_window_is_joined_with_the_next(
    serve_fake: ServerFactory,
) -> None:
    """Sent whole, "Sure, here's how." would decode whole (too short for windows), its first audio waiting
    for all of it; joined with the next sentence it is decoded in windows. The indices stay contiguous."""
    with serve_fake(FakeEngine(delay_s=WINDOW_DELAY_S), default_voice=VOICE) as live:
        segments = _segments(live, WHOLE_ANSWER)
    first, second = WHOLE_ANSWER.split(". ")[:2]
    assert segments[0]["text"] == f"{first}. {second}."
    assert [s["index"] for s in segments] == list(range(len(segments)))
    assert " ".join(s["text"] for s in segments) == WHOLE_ANSWER


def test_the_sentence_joined_to_a_short_first_one_ends_at_its_first_clause(
    serve_fake: ServerFactory,
) -> None:
    """Stage A runs on the whole joined utterance before its first window: the join stops at the next
    sentence's first clause, not its end (where a cut would land inside a phrase, it is not cut)."""
    text = (
        "Sure, here's how. Take the Red Line north to Central Station, then switch to the Blue Line "
        "toward the airport. The ride takes about twenty-five minutes."
    )
    with serve_fake(FakeEngine(delay_s=WINDOW_DELAY_S), default_voice=VOICE) as live:
        segments = _segments(live, text)
    assert segments[0]["text"] == "Sure, here's how. Take the Red Line north to Central Station,"
    assert [s["index"] for s in segments] == list(range(len(segments)))
    assert " ".join(s["text"] for s in segments) == text


def test_a_streamed_first_segment_is_not_held_back_for_text_not_yet_written(
    serve_fake: ServerFactory,
) -> None:
    with serve_fake(FakeEngine(delay_s=WINDOW_DELAY_S), default_voice=VOICE) as live:

        async def main() -> list[Event]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": "Sure, here's how. "})
                events = await until(ws, of_type("segment"))  # cut before any more text was written
                await send(ws, {"type": "append", "text": WHOLE_ANSWER.removeprefix("Sure, here's how. ")})
                await send(ws, {"type": "flush"})
                return events + await until(ws, of_type("flushed"))

        segments = [m for m in messages(run(main)) if m["type"] == "segment"]
    assert segments[0]["text"] == "Sure, here's how."
