"""Segmenting pathological text, reading SSML, or encoding a complete file or a streamed body, never holds
the event loop: at most a slice of text (of a long word too) is segmented before every other connection
gets its turn, an SSML document, a file and each part of a streamed body are read or encoded in a thread,
and ``/ping`` answers while any of it goes on.

The loop's turns are counted by a callback that re-schedules itself on every turn; each call of the
segmenter records the turn it ran in. Without slicing, a 20,000-character request of ``"| "`` was segmented
in one go (0.9 s measured before the fix) and queued no job, so admission never saw it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.audio import encoder
from koe.audio.encoder import encode_whole
from koe.pipeline import markup, stream
from koe.pipeline.stream import FEED_SLICE_CHARS
from koe.server import responses
from koe.text.segment import Segmenter
from live_checks import failures_logged, metric, wait_for
from live_server import LOOPBACK, LiveServer
from support.fake_serve import IMPORT_LOG_VARIABLE, fake_serve_process
from ws_events import WAIT_S, of_type, run, send, until

#: A word of the text below is at most this long: a slice ends after the word that crosses its end.
LONGEST_WORD = 16
TURN_CHARS = 98_000
MESSAGE_CHARS = 14_000


class LoopTurns:
    """Counts the server loop's turns, and how much text the segmenter was fed in each."""

    def __init__(self, live: LiveServer) -> None:
        self.turn = 0
        self.fed: dict[int, int] = defaultdict(int)
        self._live = live
        self._running = True

    def tick(self) -> None:
        self.turn += 1
        if self._running:
            self._live.loop.call_soon(self.tick)

    def stop(self) -> None:
        self._running = False

    def most_fed_in_one_turn(self) -> int:
        return max(self.fed.values(), default=0)


@pytest.fixture()
def turns(fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopTurns]:
    counter = LoopTurns(fake_server)
    feed = Segmenter.feed
    server_thread = fake_server.thread

    def counted(self: Segmenter, text: str) -> Any:
        if threading.current_thread() is server_thread:
            counter.fed[counter.turn] += len(text)
        return feed(self, text)

    monkeypatch.setattr(Segmenter, "feed", counted)
    fake_server.loop.call_soon_threadsafe(counter.tick)
    yield counter
    counter.stop()


def pings_during(live: LiveServer, work: threading.Thread) -> None:
    """``/ping`` answers while ``work`` runs (how fast is the benchmark's business, not a test's)."""
    with httpx.Client(timeout=60) as client:
        while work.is_alive():
            assert client.get(live.http_url + "/ping").status_code == 200


def in_thread(fn: Any) -> threading.Thread:
    thread = threading.Thread(target=fn)
    thread.start()
    return thread


def test_an_http_request_of_nothing_speakable_is_segmented_a_slice_per_loop_turn(
    fake_server: LiveServer, turns: LoopTurns
) -> None:
    body = {"model": "tts-1", "input": "| " * 10_000, "voice": "alloy", "response_format": "pcm"}
    results: list[httpx.Response] = []
    work = in_thread(lambda: results.append(httpx.post(fake_server.http_url + "/v1/audio/speech", json=body)))
    pings_during(fake_server, work)
    work.join()
    assert results[0].status_code == 200
    assert sum(turns.fed.values()) >= 20_000
    assert turns.most_fed_in_one_turn() <= FEED_SLICE_CHARS + LONGEST_WORD


@pytest.mark.parametrize(
    "unit",
    [", ", "- ", "… ", "```\n" + "code line\n"],
    ids=["commas", "dashes", "ellipses", "unclosed-fence"],
)
def test_a_98k_character_turn_of_dense_punctuation_is_segmented_a_slice_per_loop_turn(
    fake_server: LiveServer, turns: LoopTurns, unit: str
) -> None:
    if unit.startswith("```"):
        text = unit[:4] + unit[4:] * (TURN_CHARS // len(unit[4:]))
    else:
        text = unit * (TURN_CHARS // len(unit))

    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            for start in range(0, len(text), MESSAGE_CHARS):
                await send(ws, {"type": "append", "text": text[start : start + MESSAGE_CHARS]})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("flushed"))

    work = in_thread(lambda: run(main))
    pings_during(fake_server, work)
    work.join()
    assert sum(turns.fed.values()) >= len(text) - LONGEST_WORD
    assert turns.most_fed_in_one_turn() <= FEED_SLICE_CHARS + LONGEST_WORD


def test_a_20000_digit_number_is_segmented_a_slice_per_loop_turn(
    fake_server: LiveServer, turns: LoopTurns
) -> None:
    """A word is fed to the segmenter in slices too: fed whole, all of the number's segments were normalized
    in one loop turn (0.46 s for a 20,000-digit English number: a one-off, 2026-12-03, this 2-core
    machine)."""
    half = "5" * 10_000  # a message holds at most 16,000 characters: the number comes in two

    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": f"The number is {half}"})
            await send(ws, {"type": "append", "text": f"{half} ok."})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("flushed"))

    run(main)
    assert sum(turns.fed.values()) > FEED_SLICE_CHARS
    assert turns.most_fed_in_one_turn() <= FEED_SLICE_CHARS


def test_an_ssml_turn_is_read_in_a_thread_not_on_the_event_loop(
    fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading SSML costs time linear in its text, read whole once the turn is finished (and, on a route
    that takes the whole text, once before to refuse what cannot be spoken): on the loop, a
    20,000-character document held it for ~0.1 s (a one-off, 2026-12-03, this 2-core machine)."""
    threads: list[threading.Thread] = []
    read = stream.read

    def recorded(ssml: str) -> Any:
        threads.append(threading.current_thread())
        return read(ssml)

    monkeypatch.setattr(stream, "read", recorded)
    monkeypatch.setattr(markup, "read", recorded)
    body = {"text": "<speak>Hello <break time='200ms'/> there.</speak>", "format": "pcm"}
    response = httpx.post(fake_server.http_url + "/invocations", json=body, timeout=WAIT_S)
    assert response.status_code == 200 and len(response.content) > 0
    assert len(threads) == 2 and fake_server.thread not in threads  # the check, then the stream


#: How long segmenting each slice's worth of the flood below holds the loop: pathological text made slow on
#: purpose, so that segmenting all of it outlasts another turn's round trip on any machine (~1 s in all).
SLOW_SLICE_S = 0.01


def test_another_sessions_turn_is_spoken_while_a_long_one_is_segmented(
    fake_server: LiveServer, turns: LoopTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without slicing, the long unspeakable turn was segmented in one go and the other waited for it."""
    order: list[str] = []
    feed = Segmenter.feed
    flood_fed = [0]  # characters of the flood segmented so far

    def slow_on_the_flood(self: Segmenter, text: str) -> Any:
        if text.strip() == "-":  # the segmenter is fed a word at a time
            flood_fed[0] += len(text)
            if flood_fed[0] % FEED_SLICE_CHARS < len(text):
                time.sleep(SLOW_SLICE_S)  # on the loop, as slow segmenting would be
        return feed(self, text)

    monkeypatch.setattr(Segmenter, "feed", slow_on_the_flood)

    async def flood() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            text = "- " * (TURN_CHARS // 2)
            for start in range(0, len(text), MESSAGE_CHARS):
                await send(ws, {"type": "append", "text": text[start : start + MESSAGE_CHARS]})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("flushed"))
            order.append("flood")

    async def other() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await asyncio.to_thread(wait_for, lambda: bool(turns.fed), "the flood's turn to be segmented")
            await send(ws, {"type": "append", "text": "Hello there."})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("flushed"))
            order.append("other")

    async def main() -> None:
        await asyncio.gather(flood(), other())

    run(main)
    assert order == ["other", "flood"]


#: Longer than any healthy round trip of /ping on a loaded machine, shorter than the encoding is held.
PING_TIMEOUT_S = 20.0
OPEN_HTTP = 'koe_active_sessions{transport="http"}'
WHOLE_MP3 = {"text": "Hello there. How are you?", "format": "mp3", "stream": False}


class HeldEncoding:
    """``encode_whole`` held at its start until released, recording the thread it ran on and its end."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.released = threading.Event()
        self.finished = threading.Event()
        self.threads: list[threading.Thread] = []

        def held(*args: Any, **kwargs: Any) -> bytes:
            self.threads.append(threading.current_thread())
            self.started.set()
            self.released.wait(WAIT_S)  # on the loop (the fault under test) this is what /ping waits out
            try:
                return encode_whole(*args, **kwargs)
            finally:
                self.finished.set()

        monkeypatch.setattr(responses, "encode_whole", held)  # a complete file
        monkeypatch.setattr(encoder, "encode_whole", held)  # FLAC sent whole at the end of a streamed body


@pytest.fixture()
def encoding(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldEncoding]:
    held = HeldEncoding(monkeypatch)
    yield held
    held.released.set()


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (WHOLE_MP3, "audio/mpeg"),
        ({"text": WHOLE_MP3["text"], "format": "flac", "stream": True}, "audio/flac"),
    ],
    ids=["whole-mp3", "streamed-flac"],
)
def test_ping_is_answered_while_a_whole_file_is_encoded(
    fake_server: LiveServer, encoding: HeldEncoding, body: dict[str, object], content_type: str
) -> None:
    results: list[httpx.Response] = []
    work = in_thread(
        lambda: results.append(httpx.post(fake_server.http_url + "/invocations", json=body, timeout=WAIT_S))
    )
    try:
        assert encoding.started.wait(WAIT_S)
        assert httpx.get(fake_server.http_url + "/ping", timeout=PING_TIMEOUT_S).status_code == 200
    finally:
        encoding.released.set()
        work.join()
    assert results[0].status_code == 200 and results[0].headers["content-type"] == content_type
    assert len(results[0].content) > 0
    assert encoding.threads[0] is not fake_server.thread


def test_a_client_that_leaves_while_its_file_is_encoded_frees_its_slot_at_once(
    fake_server: LiveServer, encoding: HeldEncoding
) -> None:
    """The wait for the encoding is cancelled with the request; the encoding finishes in its thread and is
    dropped without a failure logged."""
    body = json.dumps(WHOLE_MP3).encode()
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}:{fake_server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with failures_logged() as failures:
        with socket.create_connection((LOOPBACK, fake_server.port)) as client:
            client.sendall(head.encode() + body)
            assert encoding.started.wait(WAIT_S)
        # the encoding is still held here: only a wait that was cancelled can free the slot
        wait_for(lambda: metric(fake_server, OPEN_HTTP) == 0, "the request's slot to be freed")
        encoding.released.set()
        assert encoding.finished.wait(WAIT_S)
        assert httpx.get(fake_server.http_url + "/ping").status_code == 200
    assert [record.getMessage() for record in failures] == []


def test_every_part_of_a_streamed_body_is_encoded_off_the_event_loop(
    fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part of MP3 costs milliseconds of CPU per second of audio, and the parts the segment cache
    replays come back to back: on the loop, an unread response of one sentence repeated held it for up to
    2.2 s (before the fix; 2026-12-03, this 2-core machine, loaded)."""
    threads: list[threading.Thread] = []
    encode = encoder.StreamEncoder.encode

    def recorded(self: encoder.StreamEncoder, chunk: Any) -> bytes:
        threads.append(threading.current_thread())
        return encode(self, chunk)

    monkeypatch.setattr(encoder.StreamEncoder, "encode", recorded)
    body = {"text": "Hello there, this is a short answer. " * 4, "format": "pcm", "sample_rate": 48_000}
    response = httpx.post(fake_server.http_url + "/invocations", json=body, timeout=WAIT_S)
    assert response.status_code == 200 and response.headers["content-type"].startswith("audio/")
    assert len(response.content) > 0 and len(response.content) % 2 == 0  # whole PCM16 samples
    assert len(threads) >= 4  # a part per sentence, at least
    assert fake_server.thread not in threads


#: After the last request, the import log is read this long later: ten of its polls, so a module imported at
#: the request's end is listed by then.
_IMPORT_LOG_SETTLE_S = 0.2


@pytest.mark.server
def test_a_first_request_of_each_kind_imports_nothing_once_the_server_is_ready(tmp_path: Path) -> None:
    """An import holds the interpreter, so a module a request imports first stalls every session's loop
    meanwhile (PyAV for the first compressed format): what requests need is imported before ``/ping`` is
    200 (:data:`koe.server.warmup.FIRST_USE_MODULES`)."""
    imports = tmp_path / "imports.txt"
    with fake_serve_process(tmp_path / "serve.log", settings={IMPORT_LOG_VARIABLE: str(imports)}) as (_, url):
        time.sleep(_IMPORT_LOG_SETTLE_S)
        at_ready = len(imports.read_text().splitlines())
        with httpx.Client(timeout=WAIT_S) as client:
            for body in (
                {"text": "Hello there.", "format": "mp3", "stream": False},
                {"text": "Hi.", "format": "opus"},
            ):
                assert client.post(url + "/invocations", json=body).status_code == 200
            assert client.post(url + "/v1/speak?encoding=mp3", json={"text": "Hi."}).status_code == 200
            speech = {"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "aac"}
            assert client.post(url + "/v1/audio/speech", json=speech).status_code == 200

        async def session() -> None:
            async with connect(url.replace("http", "ws", 1) + "/v1/stream?format=mp3") as ws:
                await send(ws, {"type": "append", "text": "Hello there."})
                await send(ws, {"type": "flush"})
                await until(ws, of_type("flushed"))

        async def agent_read() -> None:
            async with connect(url.replace("http", "ws", 1) + "/agent/ws") as ws:
                await ws.recv()  # the session
                await send(ws, {"type": "read", "text": "Hello there. How are you?", "tokens_per_s": 200})
                await until(ws, of_type("done"))

        run(session)
        run(agent_read)
        time.sleep(_IMPORT_LOG_SETTLE_S)
        imported = imports.read_text().splitlines()[at_ready:]
    assert imported == []
