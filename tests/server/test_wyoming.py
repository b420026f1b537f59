"""The Wyoming server on the scripted fake engine, driven by the reference client library (``wyoming``'s
``AsyncTcpClient`` and event classes) over real loopback connections: describe, whole and streamed requests,
voice choice, the segment cache, admission, a client that leaves, hostile and slow clients."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeTextFormat,
    SynthesizeVoice,
)

from koe import __version__
from koe.agent.replay import tokenize
from koe.engine.voices import VOICES, describe
from koe.scheduler.queue import SchedulerStats
from koe.wire.wyoming import MAX_DATA_BYTES, MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, language_tag
from live_checks import failures_logged, metric, wait_for
from live_server import LOOPBACK, LiveServer, ServerFactory
from support.fake import FakeEngine, fake_seconds
from ws_events import WAIT_S, run

#: One segment on the fake engine: its audio is exactly ``fake_seconds`` of it.
ONE_SEGMENT = "Hello there, how are you?"
#: An LLM's answer of three sentences, written at an LLM's pace.
ANSWER = (
    "Sure, the kitchen lights are on now. The living room is dark, as you asked this morning. "
    "Anything else I can do for you?"
)
TOKENS_PER_S = 30.0
#: Forty sentences, each one segment: long enough that finishing it for nobody would be seen.
SENTENCES = 40
LONG_TEXT = " ".join(f"This is sentence number {n} of a story nobody hears." for n in range(SENTENCES))
#: Segments one request has in flight at most (one running, the next queued: ``segments_ahead`` 1).
IN_FLIGHT = 2
PCM_BYTES_PER_SAMPLE = 2


@pytest.fixture(scope="module")
def live(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    with serve_fake(wyoming_port=0) as server:
        yield server


def port_of(live: LiveServer) -> int:
    port: int = live.app.state.wyoming.port
    return port


def client(live: LiveServer) -> AsyncTcpClient:
    return AsyncTcpClient(LOOPBACK, port_of(live), read_timeout=WAIT_S)


async def answer(c: AsyncTcpClient, *, last: str) -> list[Event]:
    """Every event up to and including the first of type ``last`` (or an ``error``)."""
    events = []
    while True:
        event = await c.read_event()
        assert event is not None, f"the connection closed before {last}"
        events.append(event)
        if event.type in (last, "error"):
            return events


def pcm_of(events: list[Event]) -> bytes:
    return b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))


def kinds(events: list[Event]) -> list[str]:
    """Event types, runs of ``audio-chunk`` collapsed to one."""
    out: list[str] = []
    for event in events:
        if not (out and out[-1] == event.type == "audio-chunk"):
            out.append(event.type)
    return out


async def synthesize(live: LiveServer, text: str, voice: SynthesizeVoice | None = None) -> list[Event]:
    async with client(live) as c:
        await c.write_event(Synthesize(text=text, voice=voice).event())
        return await answer(c, last="audio-stop")


def stats(live: LiveServer) -> SchedulerStats:
    return live.call(lambda: live.runtime.scheduler.stats)


def finished(live: LiveServer) -> int:
    s = stats(live)
    return s.completed + s.discarded + s.failed


def no_session(live: LiveServer) -> bool:
    return metric(live, 'koe_active_sessions{transport="wyoming"}') == 0


# --- describe, whole and streamed requests ---------------------------------------------------------------


def test_describe_advertises_every_installed_voice_with_its_language_and_the_streaming_capability(
    live: LiveServer,
) -> None:
    async def main() -> Info:
        async with client(live) as c:
            await c.write_event(Describe().event())
            event = await c.read_event()
        assert event is not None
        return Info.from_event(event)

    [tts] = run(main).tts
    assert (tts.name, tts.version, tts.installed, tts.supports_synthesize_streaming) == (
        "koe",
        __version__,
        True,
        True,
    )
    assert [voice.name for voice in tts.voices] == sorted(VOICES)
    for voice in tts.voices:
        info = describe(voice.name)
        assert voice.installed and voice.languages == [language_tag(info.lang)]
        assert voice.description is not None and info.language in voice.description


def test_a_whole_synthesize_is_answered_with_its_audio_between_audio_start_and_audio_stop(
    live: LiveServer,
) -> None:
    events = run(lambda: synthesize(live, ONE_SEGMENT))
    assert kinds(events) == ["audio-start", "audio-chunk", "audio-stop"]
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    assert all((c.rate, c.width, c.channels) == (24_000, 2, 1) for c in chunks)
    assert max(c.samples for c in chunks) <= 24_000 * live.runtime.settings.frame_s
    assert len(pcm_of(events)) == round(fake_seconds(ONE_SEGMENT) * 24_000) * PCM_BYTES_PER_SAMPLE


def test_an_empty_text_is_answered_with_no_audio(live: LiveServer) -> None:
    assert kinds(run(lambda: synthesize(live, ""))) == ["audio-start", "audio-stop"]


#: SSML without its root, as a client that declares ``text_format: ssml`` may send it.
FRAGMENT = 'Hello there, <break time="500ms"/> how are you?'


def test_ssml_text_format_reads_a_fragment_as_ssml_whole_or_streamed_in_any_pieces(live: LiveServer) -> None:
    async def whole() -> list[Event]:
        async with client(live) as c:
            await c.write_event(Synthesize(text=FRAGMENT, text_format=SynthesizeTextFormat.SSML).event())
            return await answer(c, last="audio-stop")

    async def streamed() -> list[Event]:
        async with client(live) as c:
            await c.write_event(SynthesizeStart(text_format=SynthesizeTextFormat.SSML).event())
            for start in range(0, len(FRAGMENT), 3):  # "<br", "eak"...: the root is added all the same
                await c.write_event(SynthesizeChunk(text=FRAGMENT[start : start + 3]).event())
            await c.write_event(SynthesizeStop().event())
            return await answer(c, last="synthesize-stopped")

    rooted = pcm_of(run(lambda: synthesize(live, f"<speak>{FRAGMENT}</speak>")))
    plain = pcm_of(run(lambda: synthesize(live, "Hello there, how are you?")))
    assert pcm_of(run(whole)) == rooted
    assert pcm_of(run(streamed)) == rooted
    pause_bytes = len(rooted) - len(plain)  # the break is heard as silence, not read out
    assert abs(pause_bytes / (24_000 * PCM_BYTES_PER_SAMPLE) - 0.5) < 0.1


@pytest.mark.serial  # first audio against an LLM's wall-clock pace: not beside another worker
def test_a_streamed_answer_starts_speaking_while_the_llm_is_still_writing(live: LiveServer) -> None:
    """Tokens at an LLM's pace, then the whole text again (as Home Assistant sends it) and the stop: audio
    comes after the first clause but before the last token, once, and ``synthesize-stopped`` ends it."""
    tokens = tokenize(ANSWER)
    first_clause = ANSWER.index(",") + 1
    sent: dict[str, float] = {}

    async def write(c: AsyncTcpClient) -> None:
        await c.write_event(SynthesizeStart().event())
        written = 0
        for token in tokens:
            await c.write_event(SynthesizeChunk(text=token).event())
            written += len(token)
            if written >= first_clause:
                sent.setdefault("first clause", time.monotonic())
            await asyncio.sleep(1 / TOKENS_PER_S)
        sent["last token"] = time.monotonic()
        await c.write_event(Synthesize(text=ANSWER).event())
        await c.write_event(SynthesizeStop().event())

    async def main() -> tuple[list[Event], float]:
        async with client(live) as c:
            writer = asyncio.create_task(write(c))
            first = await c.read_event()
            second = await c.read_event()
            heard_at = time.monotonic()
            assert first is not None and second is not None
            rest = await answer(c, last="synthesize-stopped")
            await writer
            return [first, second, *rest], heard_at

    events, heard_at = run(main)
    assert kinds(events) == ["audio-start", "audio-chunk", "audio-stop", "synthesize-stopped"]
    assert AudioChunk.is_type(events[1].type)
    assert sent["first clause"] < heard_at < sent["last token"]
    assert len(pcm_of(events)) > 0.9 * fake_seconds(ANSWER) * 24_000 * PCM_BYTES_PER_SAMPLE


#: A six-word first sentence (~2 s on the fake engine), and the start of the next: what a streamed answer
#: holds when its first segment is cut.
SHORT_FIRST = "Sure, here is the way to the old station."


def test_a_streamed_six_word_first_sentence_is_decoded_in_windows_not_whole(live: LiveServer) -> None:
    """Its first audio waits for stage A and one window, not the whole segment: the scheduler runs it as
    several jobs, though the text holds nothing to join it with."""
    before = finished(live)

    async def main() -> None:
        async with client(live) as c:
            await c.write_event(SynthesizeStart().event())
            for token in tokenize(SHORT_FIRST + " Take the"):
                await c.write_event(SynthesizeChunk(text=token).event())
            assert [e.type for e in await answer(c, last="audio-chunk")] == ["audio-start", "audio-chunk"]
            await asyncio.to_thread(
                wait_for,
                lambda: not stats(live).running and not stats(live).queued,
                "the scheduler to be idle",
            )
            assert finished(live) - before > 1  # the one segment, in windows
            await c.write_event(SynthesizeStop().event())
            await answer(c, last="synthesize-stopped")

    run(main)


def test_requests_of_one_connection_are_answered_in_order(live: LiveServer) -> None:
    async def main() -> list[Event]:
        async with client(live) as c:
            await c.write_event(Synthesize(text=ONE_SEGMENT).event())
            await c.write_event(SynthesizeStart().event())
            await c.write_event(SynthesizeChunk(text="Second one.").event())
            await c.write_event(SynthesizeStop().event())
            return await answer(c, last="synthesize-stopped")

    events = run(main)
    assert kinds(events) == ["audio-start", "audio-chunk", "audio-stop"] * 2 + ["synthesize-stopped"]


# --- voices ------------------------------------------------------------------------------------------------


def test_a_ping_is_answered_with_a_pong_echoing_its_text_ahead_of_the_audio_under_way(
    live: LiveServer,
) -> None:
    async def main() -> list[Event]:
        async with client(live) as c:
            await c.write_event(Synthesize(text=LONG_TEXT).event())
            await c.write_event(Ping(text="are you there").event())
            await c.write_event(Ping().event())
            return await answer(c, last="audio-stop")

    events = run(main)
    pongs = [n for n, event in enumerate(events) if Pong.is_type(event.type)]
    assert [Pong.from_event(events[n]) for n in pongs] == [Pong(text="are you there"), Pong(text=None)]
    # answered at once, not after the forty sentences' audio
    assert pongs[-1] < [n for n, event in enumerate(events) if AudioChunk.is_type(event.type)][-1]
    assert not any(Error.is_type(event.type) for event in events)


def test_a_voice_is_chosen_by_name_or_by_language_alone(live: LiveServer) -> None:
    """The fake engine's level follows the voice, so equal audio is the same voice."""

    def pcm(voice: SynthesizeVoice | None) -> bytes:
        return pcm_of(run(lambda: synthesize(live, ONE_SEGMENT, voice)))

    british, default = pcm(SynthesizeVoice(name="bf_alice")), pcm(None)
    assert british != default
    assert pcm(SynthesizeVoice(language="en-GB")) == british  # the first British voice: no default of it
    assert pcm(SynthesizeVoice(language="en_US")) == default  # the server's default speaks it
    assert pcm(SynthesizeVoice(name="af_heart", language="en-GB")) == default  # a name wins


def test_a_request_for_a_voice_koe_cannot_give_gets_an_error_and_an_answer_without_audio(
    live: LiveServer,
) -> None:
    """Home Assistant waits for ``audio-stop`` (whole) or ``synthesize-stopped`` (streamed): a refused
    request still ends, so it is not left waiting, and the connection serves the next request."""

    async def main() -> list[Event]:
        async with client(live) as c:
            await c.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="xx_nobody")).event())
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(language="de-DE")).event())
            await c.write_event(SynthesizeChunk(text="Hallo, wie geht's?").event())
            await c.write_event(Synthesize(text="Hallo, wie geht's?").event())
            await c.write_event(SynthesizeStop().event())
            await c.write_event(Synthesize(text=ONE_SEGMENT).event())
            events = []
            while len(events) < 2 or events[-1].type != "audio-stop" or len(pcm_of(events)) == 0:
                event = await c.read_event()
                assert event is not None
                events.append(event)
            return events

    events = run(main)
    errors = [Error.from_event(e).code for e in events if Error.is_type(e.type)]
    assert errors == ["unknown_voice", "invalid_field"]
    answers = kinds([e for e in events if not Error.is_type(e.type)])
    assert answers == ["audio-start", "audio-stop"] * 2 + [
        "synthesize-stopped",
        "audio-start",
        "audio-chunk",
        "audio-stop",
    ]


def test_the_segment_cache_replays_a_segment_said_before(serve_fake: ServerFactory) -> None:
    with serve_fake(wyoming_port=0, segment_cache_mb=8) as live:
        first = pcm_of(run(lambda: synthesize(live, ONE_SEGMENT)))
        second = pcm_of(run(lambda: synthesize(live, ONE_SEGMENT)))
        assert first == second
        assert metric(live, 'koe_segment_cache_lookups_total{result="hit"}') >= 1


# --- a client that leaves --------------------------------------------------------------------------------


def reset(writer: asyncio.StreamWriter) -> None:
    """Leave abruptly, as a client whose connection was reset does (RST, no FIN)."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_client_that_leaves_mid_answer_stops_its_synthesis_within_a_segment(
    serve_fake: ServerFactory, streamed: bool
) -> None:
    with failures_logged() as failures, serve_fake(engine=FakeEngine(delay_s=0.05), wyoming_port=0) as live:
        before = finished(live)

        async def main() -> None:
            c = client(live)
            await c.connect()
            if streamed:
                await c.write_event(SynthesizeStart().event())
                for sentence in LONG_TEXT.split(". "):
                    await c.write_event(SynthesizeChunk(text=sentence + ". ").event())
            else:
                await c.write_event(Synthesize(text=LONG_TEXT).event())
            await c.read_event()  # audio-start
            await asyncio.to_thread(wait_for, lambda: finished(live) >= before + 2, "two segments")
            assert c._writer is not None
            reset(c._writer)

        run(main)
        wait_for(lambda: no_session(live), "the session's slot to be released")
        left_at = finished(live)
        wait_for(lambda: stats(live).running == 0 and stats(live).queued == 0, "the scheduler to idle")
        assert finished(live) - left_at <= IN_FLIGHT
        assert finished(live) - before < SENTENCES  # the rest of the text was never synthesized
        assert metric(live, 'koe_errors_total{code="internal_error"}') == 0
    assert [record.getMessage() for record in failures] == []


# --- hostile input ----------------------------------------------------------------------------------------


def header(fields: dict[str, object]) -> bytes:
    return json.dumps(fields).encode() + b"\n"


async def exchange(live: LiveServer, data: bytes) -> tuple[Error, Event | None]:
    """Send raw ``data`` then a ``describe``; the error it earns and what comes after it."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port_of(live))
    try:
        writer.write(data + header({"type": "describe"}))
        await writer.drain()
        async with asyncio.timeout(WAIT_S):
            error = await async_read_event(reader)
            after = await async_read_event(reader)
        assert error is not None and Error.is_type(error.type), error
        return Error.from_event(error), after
    finally:
        writer.close()


#: Events the server refuses and then reads on past.
RECOVERABLE = {
    "bad JSON": (b"{not json\n", "invalid_json"),
    "an unknown event type": (header({"type": "transcribe", "data": {"language": "en"}}), "invalid_message"),
    "a payload on an event": (
        header({"type": "audio-chunk", "payload_length": 4}) + b"\0\0\0\0",
        "invalid_message",
    ),
    "a chunk outside a streamed request": (
        header({"type": "synthesize-chunk", "data": {"text": "hi"}}),
        "invalid_message",
    ),
    "a text format koe does not read": (
        header({"type": "synthesize", "data": {"text": "Hi", "text_format": "markdown"}}),
        "invalid_field",
    ),
}


@pytest.mark.parametrize("name", list(RECOVERABLE))
def test_a_malformed_event_is_answered_with_an_error_and_the_connection_goes_on(
    live: LiveServer, name: str
) -> None:
    data, code = RECOVERABLE[name]
    error, after = run(lambda: exchange(live, data))
    assert error.code == code and len(error.text) < 1000  # says why, never echoes the input whole
    assert after is not None and Info.is_type(after.type)


def with_data(kind: str, data: dict[str, object]) -> bytes:
    """An event with its data in the data section, as the reference library writes it."""
    section = json.dumps(data).encode()
    return header({"type": kind, "data_length": len(section)}) + section


#: Events after which the next one's start cannot be known, or that end the session as on a WebSocket:
#: the connection ends after the error.
FATAL = {
    "an oversized header line": (b"{" + b" " * MAX_HEADER_BYTES, "message_too_large"),
    "a huge data_length": (
        header({"type": "synthesize", "data_length": MAX_DATA_BYTES + 1}),
        "message_too_large",
    ),
    "a huge payload_length": (
        header({"type": "synthesize", "payload_length": MAX_PAYLOAD_BYTES + 1}),
        "message_too_large",
    ),
    "a data_length that is no number": (
        header({"type": "synthesize", "data_length": "lots"}),
        "invalid_message",
    ),
    "a text over the turn's limit": (with_data("synthesize", {"text": "x" * 100_001}), "text_too_long"),
}


@pytest.mark.parametrize("name", list(FATAL))
def test_an_event_that_loses_the_stream_is_answered_with_an_error_and_the_server_keeps_serving(
    live: LiveServer, name: str
) -> None:
    data, code = FATAL[name]
    with failures_logged() as failures:
        error, after = run(lambda: exchange(live, data))
        assert error.code == code
        assert after is None  # the connection ended
        assert kinds(run(lambda: synthesize(live, ONE_SEGMENT)))[-1] == "audio-stop"  # others are served
    assert [record.getMessage() for record in failures] == []


# --- admission, idle and slow clients ------------------------------------------------------------------


def test_wyoming_sessions_share_the_session_slots_with_websocket_sessions(serve_fake: ServerFactory) -> None:
    from websockets.asyncio.client import connect

    from live_checks import close_code
    from ws_events import receive

    async def main(live: LiveServer) -> None:
        async with client(live) as admitted:
            await admitted.write_event(Describe().event())
            assert (await admitted.read_event()) is not None
            async with client(live) as refused:
                event = await refused.read_event()
                assert event is not None and Error.from_event(event).code == "too_many_sessions"
                assert await refused.read_event() is None
            async with connect(live.ws_url + "/v1/stream") as ws:
                message = await receive(ws)
                assert isinstance(message, dict) and message["code"] == "too_many_sessions"
                with pytest.raises(Exception) as closed:
                    await receive(ws)
                assert close_code(closed.value) == 1013  # type: ignore[arg-type]

    with serve_fake(wyoming_port=0, max_sessions=1) as live:
        run(lambda: main(live))
        wait_for(lambda: no_session(live), "the slot to free")
        assert kinds(run(lambda: synthesize(live, ONE_SEGMENT)))[-1] == "audio-stop"


SLOW = {
    "silent": (b"", "idle_timeout"),
    "a header line that never ends": (b'{"type": "describe"', "event_timeout"),
    "data that never comes": (
        header({"type": "synthesize", "data_length": 40}) + b'{"text"',
        "event_timeout",
    ),
}


@pytest.mark.parametrize("name", list(SLOW))
def test_idle_and_slow_clients_are_told_and_cut_off(serve_fake: ServerFactory, name: str) -> None:
    data, code = SLOW[name]
    limits = {"idle_timeout_s": 0.5, "header_timeout_s": 0.5, "body_timeout_s": 0.5}

    async def main(live: LiveServer) -> tuple[Event | None, Event | None]:
        reader, writer = await asyncio.open_connection(LOOPBACK, port_of(live))
        try:
            writer.write(data)
            async with asyncio.timeout(WAIT_S):
                return await async_read_event(reader), await async_read_event(reader)
        finally:
            writer.close()

    with serve_fake(wyoming_port=0, **limits) as live:
        started = time.monotonic()
        error, after = run(lambda: main(live))
        assert error is not None and Error.from_event(error).code == code
        assert after is None and time.monotonic() - started < 5
        wait_for(lambda: no_session(live), "the slot to free")


def test_a_client_that_never_reads_is_cut_off_and_its_synthesis_stops(serve_fake: ServerFactory) -> None:
    limits = {"send_timeout_s": 1.0, "max_turn_chars": 400_000}
    with serve_fake(wyoming_port=0, **limits) as live:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((LOOPBACK, port_of(live)))
        sock.sendall(header({"type": "synthesize", "data": {"text": LONG_TEXT * 8}}))
        try:
            wait_for(lambda: no_session(live), "the stalled session to be cut off")
            wait_for(lambda: stats(live).running == 0 and stats(live).queued == 0, "the scheduler to idle")
            assert finished(live) < SENTENCES * 8
        finally:
            sock.close()


def test_shutdown_lets_the_answer_under_way_finish_then_closes_the_connection(
    serve_fake: ServerFactory,
) -> None:
    text = "The first sentence is spoken. The second one is spoken too, whole."
    with serve_fake(engine=FakeEngine(delay_s=0.05), wyoming_port=0) as live:
        whole = pcm_of(run(lambda: synthesize(live, text)))

        async def main() -> tuple[list[Event], Event | None]:
            async with client(live) as c:
                await c.write_event(Synthesize(text=text).event())
                await c.read_event()  # audio-start: the answer is under way
                stopping = asyncio.create_task(asyncio.to_thread(live.stop))
                events = await answer(c, last="audio-stop")
                after = await c.read_event()
                await stopping
                return events, after

        events, after = run(main)
    assert events[-1].type == "audio-stop" and after is None
    assert len(pcm_of(events)) == len(whole)
