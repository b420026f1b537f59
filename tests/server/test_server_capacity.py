"""Admission by the machine's speed (koe.scheduler.capacity) on live servers: a newcomer is refused before it
would make every listener gap; what was admitted goes on. The fake engine's gate holds listeners speaking;
the server's meter is scripted (the fake engine's audio costs next to no CPU): a CPU clock that advances
with the audio made at a rate the test sets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.tts import Synthesize

from koe.app import create_app
from koe.scheduler.capacity import WINDOW_AUDIO_S, AudioPerCpu
from koe.scheduler.cost import SegmentCost
from koe.settings import Settings
from live_checks import close_code, metric, wait_for
from live_server import LOOPBACK, LiveServer, run_server
from support.fake import FakeEngine, fake_seconds, fake_speech
from ws_events import WAIT_S, audio, messages, receive, run, send, until

TEXT = "Hello there."
#: One core making 4 audio-seconds per CPU-second: 0.6 of it carries 2 listeners, not 3.
AUDIO_PER_CPU_S = 4.0


class ScriptedMeter(AudioPerCpu):
    """The server's meter on a CPU clock that advances by each segment's audio over ``audio_per_cpu_s``."""

    def __init__(self, audio_per_cpu_s: float | None) -> None:
        super().__init__(lambda: self.spent_s, audio_per_cpu_s)
        self.audio_per_cpu_s = audio_per_cpu_s or 1.0
        self.spent_s = 0.0

    def made(self, audio_s: float) -> None:
        self.spent_s += audio_s / self.audio_per_cpu_s
        super().made(audio_s)


@contextmanager
def serve(
    engine: FakeEngine, audio_per_cpu_s: float | None = AUDIO_PER_CPU_S, **overrides: Any
) -> Iterator[LiveServer]:
    """A server on ``engine`` with one core for its calls, whose meter starts at ``audio_per_cpu_s`` and
    follows :class:`ScriptedMeter`."""
    settings = Settings(
        **{
            "host": LOOPBACK,
            "port": 0,
            "segment_cache_mb": 0,
            "workers": 1,
            "threads_per_worker": 1,
            **overrides,
        }
    )
    # a cost model given: no start-up timing, which a gated engine would hold
    with run_server(create_app(settings, fake_speech(engine), cost=SegmentCost()), settings) as live:
        script_meter(live, audio_per_cpu_s)
        yield live


def script_meter(live: LiveServer, audio_per_cpu_s: float | None) -> ScriptedMeter:
    """The server's meter replaced by a :class:`ScriptedMeter` starting at ``audio_per_cpu_s``."""
    meter = ScriptedMeter(audio_per_cpu_s)
    live.call(lambda: setattr(live.runtime.capacity, "meter", meter))
    return meter


def speaking(live: LiveServer) -> int:
    return live.call(lambda: live.runtime.capacity.speaking)


def wait_speaking(live: LiveServer, count: int) -> None:
    wait_for(lambda: speaking(live) == count, f"{count} listeners to be spoken to")


async def speak(ws: ClientConnection, text: str = TEXT) -> None:
    await send(ws, {"type": "append", "text": text})


async def refused(ws: ClientConnection) -> tuple[dict[str, Any], int | None]:
    """The refusal a newcomer gets for its first text: the error, then the close code."""
    await speak(ws)
    error = await receive(ws)
    with pytest.raises(ConnectionClosed) as closed:
        await receive(ws)
    assert isinstance(error, dict)
    return error, close_code(closed.value)


@asynccontextmanager
async def two_speaking(live: LiveServer) -> AsyncIterator[tuple[ClientConnection, ClientConnection]]:
    """Two sessions whose first turns are being spoken (held at the fake engine's gate)."""
    url = live.ws_url + "/v1/stream"
    async with connect(url) as first, connect(url) as second:
        await speak(first)
        await speak(second)
        await asyncio.to_thread(wait_speaking, live, 2)
        yield first, second


async def flushed(ws: ClientConnection, turn: int) -> list[Any]:
    """Flush, and every event up to that turn's ``flushed``."""
    await send(ws, {"type": "flush"})
    return await until(ws, lambda m: m.get("type") == "flushed" and m.get("turn") == turn)


def test_listeners_past_the_share_of_the_machines_speed_are_refused_with_a_retry_hint() -> None:
    held = threading.Event()
    with serve(FakeEngine(gate=held)) as live:

        async def main() -> None:
            async with two_speaking(live) as (first, second):
                assert await asyncio.to_thread(metric, live, "koe_listeners_speaking") == 2
                supply = await asyncio.to_thread(metric, live, "koe_capacity_audio_per_second")
                assert supply == pytest.approx(AUDIO_PER_CPU_S)  # what the third is judged on
                async with connect(live.ws_url + "/v1/stream") as third:
                    error, code = await refused(third)
                assert (error["type"], error["code"], code) == ("error", "over_capacity", 1013)
                assert error["retry_after_s"] >= 1.0
                response = await asyncio.to_thread(
                    httpx.post, live.http_url + "/invocations", json={"text": TEXT}
                )
                assert (response.status_code, response.json()["error"]) == (503, "over_capacity")
                assert int(response.headers["retry-after"]) >= 1
                bad = await asyncio.to_thread(  # a bad request is told what is wrong with it, not "busy"
                    httpx.post, live.http_url + "/invocations", json={"text": TEXT, "voice": "zz_nobody"}
                )
                assert bad.status_code == 400
                # the admitted sessions go on: more text for the open turn, then a next turn, none refused
                await speak(first, " And more.")
                await send(first, {"type": "flush"})
                await speak(first, "A second turn.")
                held.set()
                events = await flushed(first, 1)
                assert [m for m in messages(events) if m["type"] == "error"] == []
                assert len(audio(events)) > 0
                second_events = await flushed(second, 0)
                assert len(audio(second_events)) == round(fake_seconds(TEXT) * 24000) * 2

        run(main)
        wait_speaking(live, 0)
        assert live.call(lambda: live.runtime.capacity.refused) == 2  # the bad request was not counted


def test_when_a_listener_is_done_the_next_is_admitted_while_the_other_still_speaks() -> None:
    held = threading.Event()
    with serve(FakeEngine(gate=held)) as live:

        async def main() -> None:
            url = live.ws_url + "/v1/stream"
            async with two_speaking(live) as (_, second):
                await send(second, {"type": "cancel"})  # its turn is over: the machine has room again
                await until(second, lambda m: m.get("type") == "cancelled")
                await asyncio.to_thread(wait_speaking, live, 1)
                async with connect(url) as newcomer:
                    await speak(newcomer)
                    await asyncio.to_thread(wait_speaking, live, 2)
                    held.set()
                    events = await flushed(newcomer, 0)
                assert len(audio(events)) == round(fake_seconds(TEXT) * 24000) * 2

        run(main)
        assert live.call(lambda: live.runtime.capacity.refused) == 0


def test_a_share_of_zero_admits_every_listener() -> None:
    held = threading.Event()
    with serve(FakeEngine(gate=held), audio_per_cpu_s=0.1, capacity_share=0.0) as live:

        async def main() -> None:
            url = live.ws_url + "/v1/stream"
            async with connect(url) as a, connect(url) as b, connect(url) as c:
                for ws in (a, b, c):
                    await speak(ws)
                await asyncio.to_thread(wait_speaking, live, 3)
                held.set()
                for ws in (a, b, c):
                    assert len(audio(await flushed(ws, 0))) == round(fake_seconds(TEXT) * 24000) * 2

        run(main)


def test_a_machine_that_makes_less_audio_per_cpu_second_admits_fewer_listeners() -> None:
    engine = FakeEngine()
    with serve(engine) as live:
        url = live.ws_url + "/v1/stream"
        meter = script_meter(live, AUDIO_PER_CPU_S)
        meter.audio_per_cpu_s = 1.0  # from now on each audio-second costs four times the CPU

        async def slowed() -> None:
            async with connect(url) as a:  # alone: admitted, and its audio fills the meter's windows
                for _ in range(round(2 * WINDOW_AUDIO_S / fake_seconds(TEXT)) + 1):
                    await speak(a)
                await flushed(a, 0)
            engine.gate = threading.Event()
            async with connect(url) as b, connect(url) as c:
                await speak(b)
                await asyncio.to_thread(wait_speaking, live, 1)
                error, code = await refused(c)
                assert (error["code"], code) == ("over_capacity", 1013)
                engine.gate.set()

        run(slowed)
        supply = metric(live, "koe_capacity_audio_per_second")
        assert supply < 2 / 0.6  # two listeners no longer fit in 0.6 of it
        assert live.call(lambda: live.runtime.capacity.refused) == 1


def test_a_wyoming_request_past_the_share_is_refused_before_its_audio_and_a_later_one_is_answered() -> None:
    held = threading.Event()
    with serve(FakeEngine(gate=held), wyoming_port=0) as live:
        port = live.app.state.wyoming.port

        def wyoming() -> AsyncTcpClient:
            return AsyncTcpClient(LOOPBACK, port, read_timeout=WAIT_S)

        async def main() -> None:
            async with two_speaking(live) as (first, second):
                async with wyoming() as newcomer:
                    await newcomer.write_event(Synthesize(text=TEXT).event())
                    event = await newcomer.read_event()
                    assert event is not None and event.type == "error"  # no audio-start before it
                    assert Error.from_event(event).code == "over_capacity"
                    assert await newcomer.read_event() is None  # closed, as a WebSocket is with 1013
                held.set()
                for ws in (first, second):
                    assert len(audio(await flushed(ws, 0))) > 0
            await asyncio.to_thread(wait_speaking, live, 0)
            async with wyoming() as later:
                await later.write_event(Synthesize(text=TEXT).event())
                types: list[str] = []
                while not types or types[-1] not in ("audio-stop", "error"):
                    event = await later.read_event()
                    assert event is not None
                    types.append(event.type)
            assert types[0] == "audio-start" and types[-1] == "audio-stop" and "audio-chunk" in types

        run(main)
        assert live.call(lambda: live.runtime.capacity.refused) == 1
