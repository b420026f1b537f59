"""``koe wyoming --uri stdio://`` as its own process on the scripted fake engine (``support.fake_serve``),
driven over its stdin and stdout by the reference library's event reader and writer: the session is the TCP
one; stdout carries events and nothing else, whatever prints; the end of stdin ends the process."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from koe.cli import main
from koe.server.stdio import drop
from support.fake import fake_seconds
from support.fake_serve import DELAY_VARIABLE, LOAD_VARIABLE
from ws_events import WAIT_S, run

#: One segment on the fake engine, sent in pieces that split its words.
PIECES = ("Hello the", "re, how are", " you?")
PCM_BYTES_PER_SAMPLE = 2
#: What a chatty library writes to stdout, through ``print`` and to descriptor 1 itself.
NOISE = "a library talking on stdout"
#: ``koe`` on the fake engine whose every call prints :data:`NOISE` and writes it to descriptor 1.
CHATTY = f"""
import os, runpy
from support.fake import FakeEngine
work = FakeEngine.work
def chatty(self, request, cancel=None):
    print({NOISE!r}, flush=True)
    os.write(1, {NOISE!r}.encode() + b"\\n")
    return work(self, request, cancel)
FakeEngine.work = chatty
runpy.run_module("support.fake_serve", run_name="__main__")
"""
#: Far more than the process needs to exit once stdin ends or a signal comes; a hang takes the grace (20 s).
STOP_S = 10.0
#: What the server process needs on ``PYTHONPATH``: tests/, for ``support``.
TESTS = str(Path(__file__).resolve().parents[1])
#: Sentences of one segment each, at 0.2 s an engine call: many seconds to speak whole.
LONG_TEXT = " ".join(f"This is sentence number {n} of a story nobody hears." for n in range(30))


class Server:
    """A ``koe wyoming --uri stdio://`` process: events written to its stdin, read from its stdout, where
    every byte is also kept (:attr:`raw`) to be parsed on its own."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.events = asyncio.StreamReader()
        self.raw = bytearray()
        self._pump = asyncio.create_task(self._copy(process.stdout))

    async def _copy(self, stdout: asyncio.StreamReader) -> None:
        while chunk := await stdout.read(64 * 1024):
            self.raw += chunk
            self.events.feed_data(chunk)
        self.events.feed_eof()

    async def send(self, event: Event) -> None:
        await async_write_event(event, self.stdin)

    async def receive(self) -> Event:
        async with asyncio.timeout(WAIT_S):
            event = await async_read_event(self.events)
        assert event is not None, "stdout ended, or held something that is no event"
        return event

    async def until(self, last: str) -> list[Event]:
        """Every event up to and including the first of type ``last`` (or an ``error``)."""
        events = [await self.receive()]
        while events[-1].type not in (last, "error"):
            events.append(await self.receive())
        return events

    async def exit_status(self) -> int:
        """Its exit status, once it has exited and its stdout has ended."""
        async with asyncio.timeout(STOP_S):
            status = await self.process.wait()
            await self._pump
        return status


def python_path() -> str:
    return os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])


@asynccontextmanager
async def koe_wyoming_stdio(
    log: Path, *, chatty: bool = False, env: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    """``koe --log-level DEBUG wyoming --uri stdio://`` on the fake engine (``chatty``: :data:`CHATTY`'s),
    its stderr in ``log``; killed if still running at the end."""
    environment = {**os.environ, **(env or {}), "PYTHONPATH": python_path()}
    program = ["-c", CHATTY] if chatty else ["-m", "support.fake_serve"]
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, *program, "--log-level", "DEBUG", "wyoming", "--uri", "stdio://",
            env=environment, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=sink,
        )  # fmt: skip
    try:
        yield Server(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def events_of(raw: bytes) -> list[Event]:
    """Every event in ``raw``, which must be events and nothing else: a header line of JSON with its
    ``type``, then exactly ``data_length`` bytes of JSON and ``payload_length`` bytes (the reference
    reader stops without a word at a line that is no JSON)."""
    events = []
    rest = raw
    while rest:
        line, newline, rest = rest.partition(b"\n")
        assert newline, f"a header line without its end: {line[:80]!r}"
        header = json.loads(line)
        assert isinstance(header, dict) and isinstance(header["type"], str), f"no event: {line[:80]!r}"
        data_length, payload_length = header.get("data_length", 0), header.get("payload_length", 0)
        assert len(rest) >= data_length + payload_length, f"{header['type']} cut short"
        data: dict[str, Any] = header.get("data", {})
        if data_length:
            data.update(json.loads(rest[:data_length]))
        payload = rest[data_length : data_length + payload_length]
        events.append(Event(header["type"], data, payload or None))
        rest = rest[data_length + payload_length :]
    return events


def test_only_events_parse_as_events() -> None:
    """The control of the check on stdout: a line of text among events fails it."""
    good = b'{"type": "ping"}\n'
    assert [e.type for e in events_of(good * 2)] == ["ping", "ping"]
    with pytest.raises(json.JSONDecodeError):
        events_of(good + NOISE.encode() + b"\n" + good)


def test_stdio_answers_describe_and_a_streamed_request_with_nothing_but_events_on_stdout(
    tmp_path: Path,
) -> None:
    log = tmp_path / "wyoming.log"

    async def main() -> tuple[list[Event], int, bytes]:
        async with koe_wyoming_stdio(log, chatty=True) as server:
            await server.send(Describe().event())
            events = [await server.receive()]
            await server.send(SynthesizeStart().event())
            for piece in PIECES:
                await server.send(SynthesizeChunk(text=piece).event())
            await server.send(SynthesizeStop().event())
            events += await server.until("synthesize-stopped")
            server.stdin.close()
            status = await server.exit_status()
            return events, status, bytes(server.raw)

    events, status, raw = run(main)
    assert status == 0
    info = Info.from_event(events[0])
    assert info.tts[0].supports_synthesize_streaming
    types = [e.type for e in events[1:]]
    assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "synthesize-stopped"]
    assert set(types[1:-2]) == {"audio-chunk"}
    start = AudioStart.from_event(events[1])
    assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
    pcm = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
    assert len(pcm) == round(fake_seconds("".join(PIECES)) * 24_000) * PCM_BYTES_PER_SAMPLE
    # every byte of stdout is an event, and the events are those the client read, with their audio
    parsed = events_of(raw)
    assert [(e.type, e.payload) for e in parsed] == [(e.type, e.payload) for e in events]
    output = log.read_text()
    assert NOISE in output, "the control: the library did print, and it went to stderr"
    assert "koe's Wyoming server on stdio://" in output and "Traceback" not in output


def test_a_malformed_line_gets_an_error_event_and_the_next_event_is_answered(tmp_path: Path) -> None:
    log = tmp_path / "wyoming.log"

    async def main() -> tuple[Event, Event, int]:
        async with koe_wyoming_stdio(log) as server:
            server.stdin.write(b"this is no JSON\n")
            error = await server.receive()
            await server.send(Describe().event())
            after = await server.receive()
            server.process.send_signal(signal.SIGTERM)  # an idle connection ends at once
            return error, after, await server.exit_status()

    error, after, status = run(main)
    assert Error.is_type(error.type) and Error.from_event(error).code == "invalid_json"
    assert Info.is_type(after.type)
    assert status == 0
    assert "Traceback" not in log.read_text()


def test_the_end_of_stdin_drops_the_answer_under_way_and_the_process_exits_0_at_once(tmp_path: Path) -> None:
    log = tmp_path / "wyoming.log"

    async def main() -> tuple[list[str], float, int]:
        async with koe_wyoming_stdio(log, env={DELAY_VARIABLE: "0.2"}) as server:
            await server.send(Synthesize(text=LONG_TEXT).event())
            types = [(await server.receive()).type, (await server.receive()).type]
            server.stdin.close()
            closed = time.monotonic()
            status = await server.exit_status()
            types += [e.type for e in events_of(bytes(server.raw))[len(types) :]]
            return types, time.monotonic() - closed, status

    types, exit_s, status = run(main)
    assert types[:2] == ["audio-start", "audio-chunk"]
    assert "audio-stop" not in types, "the answer was spoken to the end for nobody"
    assert status == 0 and exit_s < STOP_S
    output = log.read_text()
    assert "wyoming session closed" in output and "Traceback" not in output


def test_nothing_is_read_before_the_model_has_loaded_so_the_one_client_waits_instead_of_being_refused(
    tmp_path: Path,
) -> None:
    log = tmp_path / "wyoming.log"

    async def main() -> Event:
        async with koe_wyoming_stdio(log, env={LOAD_VARIABLE: "1.5"}) as server:
            await server.send(Describe().event())  # at once: the model is still loading
            answer = await server.receive()
            server.stdin.close()
            assert await server.exit_status() == 0
            return answer

    assert Info.is_type(run(main).type)
    output = log.read_text()
    assert output.index("ready in") < output.index("wyoming: serving one connection on stdin and stdout")


def test_stdin_from_a_regular_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    events = tmp_path / "events.bin"
    events.write_bytes(b'{"type": "describe"}\n')
    log = tmp_path / "wyoming.log"

    async def main() -> tuple[int, bytes]:
        env = {**os.environ, "PYTHONPATH": python_path()}
        with events.open("rb") as stdin, log.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "support.fake_serve", "wyoming", "--uri", "stdio://",
                env=env, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=sink,
            )  # fmt: skip
        out, _ = await process.communicate()
        return await process.wait(), out

    status, out = run(main)
    assert status == 2 and out == b""
    assert "expected stdin to be a pipe, a socket or a terminal, got a regular file" in log.read_text()


def test_a_pipe_that_has_closed_is_not_dropped_again() -> None:
    """asyncio's pipe transport fails when aborted after its loss was reported; a socket's does not."""

    async def main() -> None:
        read_end, write_end = os.pipe()
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()

        class Watched(asyncio.Protocol):
            def connection_lost(self, exc: Exception | None) -> None:
                lost.set_result(None)

        transport, _ = await loop.connect_write_pipe(Watched, io.FileIO(write_end, "wb"))
        transport.close()
        await lost
        drop(transport)
        os.close(read_end)

    run(main)


@pytest.mark.parametrize(
    "argv",
    [["--zeroconf"], ["--zeroconf", "kitchen"], ["--port", "10200"]],
    ids=["zeroconf", "zeroconf-named", "with-port"],
)
def test_stdio_with_zeroconf_or_an_address_is_refused_before_loading(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wyoming", "--uri", "stdio://", *argv]) == 2
    assert "--uri" in capsys.readouterr().err
