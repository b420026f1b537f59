"""Admission, overload, backpressure, disconnects, readiness and shutdown, each on its own live server."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from koe.app import create_app
from koe.engine.voices import VoiceBank
from koe.pipeline.speech import Speech
from koe.scheduler.queue import SchedulerStats
from koe.settings import Settings
from koe.wire.params import LANGS
from koe_bench.soak import rss_bytes
from live_checks import (
    assert_serving,
    close_code,
    failures_logged,
    metric,
    server_tasks,
    wait_for,
    wait_idle,
)
from live_server import LOOPBACK, LiveServer, ServerFactory, loopback_socket, run_server
from support.fake import FakeEngine, FakeG2P, fake_seconds, fake_voices
from support.warm import warm_app
from ws_events import WAIT_S, audio, messages, of_type, receive, run, send, until


class Gate:
    """A real job that holds a scheduler worker until released: makes saturation deterministic."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self) -> None:
        self.release.wait(WAIT_S)


def stats(live: LiveServer) -> SchedulerStats:
    return live.call(lambda: live.runtime.scheduler.stats)


def test_a_saturated_queue_refuses_new_work_with_a_retry_hint(serve_fake: ServerFactory) -> None:
    with serve_fake(workers=1, max_queued_jobs=1) as live:
        gate = Gate()
        scheduler = live.runtime.scheduler
        live.call(lambda: scheduler.submit(gate, deadline=0.0, cost_s=2.0))
        wait_for(lambda: stats(live).running == 1, "the gate to run")
        live.call(lambda: scheduler.submit(gate, deadline=0.0, cost_s=2.0))  # the one queue place

        response = httpx.post(live.http_url + "/invocations", json={"text": "Hello."})
        assert response.status_code == 503
        assert response.json()["error"] == "queue_saturated"
        assert response.json()["retry_after_s"] >= 1.0
        assert int(response.headers["retry-after"]) >= 1

        async def session() -> tuple[list[dict[str, object]], int | None]:
            async with connect(live.ws_url + "/v1/stream") as ws:
                await send(ws, {"type": "append", "text": "Hello."})
                await send(ws, {"type": "flush"})
                error = await receive(ws)
                with pytest.raises(ConnectionClosed) as closed:
                    await receive(ws)
                assert isinstance(error, dict)
                return [error], close_code(closed.value)

        errors, code = run(session)
        assert (errors[0]["code"], code) == ("queue_saturated", 1013)
        assert float(errors[0]["retry_after_s"]) >= 1.0  # type: ignore[arg-type]
        gate.release.set()
        wait_for(lambda: stats(live).running == 0 and stats(live).queued == 0, "the gates to finish")
        assert (
            httpx.post(
                live.http_url + "/invocations", json={"text": "Hi.", "format": "pcm"}, timeout=WAIT_S
            ).status_code
            == 200
        )


#: A refusal that takes longer than this is a hang (a healthy server refuses in milliseconds).
REFUSAL_TIMEOUT_S = 10.0
ADMITTED_TEXT = "Hello there, how are you?"
#: Connections refused while the admitted session's turn is held in synthesis.
FLOOD = 4


async def _refused(live: LiveServer) -> None:
    async with asyncio.timeout(REFUSAL_TIMEOUT_S), connect(live.ws_url + "/v1/stream") as ws:
        error = await receive(ws)
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
    assert isinstance(error, dict) and error["code"] == "too_many_sessions"
    assert error["retry_after_s"] >= 1.0 and "retry" in error["message"]
    assert close_code(closed.value) == 1013


def test_sessions_over_the_limit_are_refused_while_the_admitted_ones_turn_is_still_synthesizing(
    serve_fake: ServerFactory,
) -> None:
    """Real sessions over ``max_sessions``: every one is refused while the admitted session's synthesis is
    held (refusing waits for no work), and the admitted turn then ends whole and in order. How fast it is
    under a flood is measured, not asserted here."""
    held = threading.Event()
    engine = FakeEngine(gate=held)

    async def main(live: LiveServer) -> None:
        async with connect(live.ws_url + "/v1/stream") as admitted:
            await send(admitted, {"type": "append", "text": ADMITTED_TEXT})
            await send(admitted, {"type": "flush"})
            await asyncio.to_thread(wait_for, lambda: engine.calls > 0, "the admitted turn to synthesize")
            await asyncio.gather(*(_refused(live) for _ in range(FLOOD)))
            assert not held.is_set() and stats(live).running == 1  # all refused while the turn was held
            held.set()
            events = await until(admitted, of_type("flushed"))
            assert len(audio(events)) == round(fake_seconds(ADMITTED_TEXT) * 24000) * 2
            await send(admitted, {"type": "cancel"})  # the admitted session is still in order
            assert await receive(admitted) == {"type": "cancelled", "turn": 1}

    with serve_fake(engine, max_sessions=1) as live:
        run(lambda: main(live))
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="ws"}') == 0, "the slot to free")
        assert metric(live, 'koe_errors_total{code="too_many_sessions"}') == FLOOD
        assert_serving(live)


def _post_in_thread(live: LiveServer, text: str, results: list[httpx.Response]) -> threading.Thread:
    body = {"text": text, "format": "pcm"}
    thread = threading.Thread(
        target=lambda: results.append(httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S))
    )
    thread.start()
    return thread


def test_http_requests_over_the_limit_are_refused_while_real_requests_hold_every_slot(
    serve_fake: ServerFactory,
) -> None:
    held = threading.Event()
    engine = FakeEngine(gate=held)
    with serve_fake(engine, max_http_requests=2) as live:
        results: list[httpx.Response] = []
        threads = [_post_in_thread(live, text, results) for text in ("One.", "Two.")]
        wait_for(lambda: metric(live, 'koe_active_sessions{transport="http"}') == 2, "both slots to be held")
        refused = httpx.post(live.http_url + "/invocations", json={"text": "Three."})
        assert (refused.status_code, refused.json()["error"]) == (503, "too_many_sessions")
        assert int(refused.headers["retry-after"]) >= 1 and "retry" in refused.json()["message"]
        held.set()
        for thread in threads:
            thread.join(WAIT_S)
        spoken = sorted(len(r.content) for r in results if r.status_code == 200)
        assert spoken == sorted(round(fake_seconds(t) * 24000) * 2 for t in ("One.", "Two."))
        again = httpx.post(live.http_url + "/invocations", json={"text": "Three.", "format": "pcm"})
        assert again.status_code == 200 and len(again.content) == round(fake_seconds("Three.") * 24000) * 2


def test_a_queue_filled_by_real_requests_refuses_the_next_with_queue_saturated(
    serve_fake: ServerFactory,
) -> None:
    """One worker, one queue place: the first request's segment runs (held), the second's waits in the
    queue, the third finds no room."""
    held = threading.Event()
    with serve_fake(FakeEngine(gate=held), workers=1, max_queued_jobs=1) as live:
        results: list[httpx.Response] = []
        first = _post_in_thread(live, "One.", results)
        wait_for(lambda: stats(live).running == 1, "the first request's segment to run")
        second = _post_in_thread(live, "Two.", results)
        wait_for(lambda: stats(live).queued == 1, "the second request's segment to be queued")
        refused = httpx.post(live.http_url + "/invocations", json={"text": "Three."})
        assert (refused.status_code, refused.json()["error"]) == (503, "queue_saturated")
        assert refused.json()["retry_after_s"] >= 1.0 and int(refused.headers["retry-after"]) >= 1
        held.set()
        for thread in (first, second):
            thread.join(WAIT_S)
        assert [r.status_code for r in results] == [200, 200]


async def _vanish(ws: ClientConnection) -> None:
    ws.transport.abort()  # no close handshake: the client just vanishes


async def _vanish_mid_frame(ws: ClientConnection) -> None:
    # a masked text frame announcing 1000 bytes, of which only 10 ever arrive
    ws.transport.write(b"\x81\xfe\x03\xe8" + b"mask" + b"0123456789")
    await asyncio.sleep(0.2)
    ws.transport.abort()


async def _vanish_during_cancel(ws: ClientConnection) -> None:
    await send(ws, {"type": "cancel"})
    ws.transport.abort()  # before the reply: the server's writer finds the socket gone


@pytest.mark.parametrize(
    "vanish", [_vanish, _vanish_mid_frame, _vanish_during_cancel], ids=["mid-turn", "mid-frame", "in-cancel"]
)
def test_an_abrupt_disconnect_drains_the_queue_and_leaks_no_task(
    serve_fake: ServerFactory, vanish: Callable[[ClientConnection], Awaitable[None]]
) -> None:
    text = " ".join(f"This is sentence number {n} of the answer." for n in range(1, 7))
    completed = 'koe_jobs_total{outcome="completed"}'
    later = threading.Event()  # synthesis after the first segment waits until the client has vanished
    with serve_fake(FakeEngine(gate=later, gate_after=1)) as live:
        tasks = server_tasks(live)

        async def main() -> None:
            ws = await connect(live.ws_url + "/v1/stream")
            await send(ws, {"type": "append", "text": text})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("segment"))
            await vanish(ws)

        run(main)
        wait_for(lambda: server_tasks(live) <= tasks, "the session's tasks to end")
        later.set()
        wait_idle(live, tasks)
        assert metric(live, completed) <= 2  # the rest of the answer was never synthesized
        assert_serving(live)


#: Memory a paused session plus another session's turn may add (in-process: the test's own allocations too).
RSS_SLACK_BYTES = 64 * 2**20


@pytest.mark.slow
def test_a_client_that_stops_reading_pauses_its_own_synthesis(serve_fake: ServerFactory) -> None:
    """Small socket buffers make the pause come after a few seconds of audio instead of megabytes."""
    # short: the audio still unread at the pause crosses the small buffers slowly once reading resumes
    sentences = [f"Sentence {n}." for n in range(1, 7)]

    async def main(live: LiveServer) -> None:
        await asyncio.to_thread(assert_serving, live)
        turn_jobs = stats(live).completed  # the jobs of one short turn, alone (the fake is deterministic)
        client = socket.create_connection((LOOPBACK, live.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        async with connect(live.ws_url + "/v1/stream?sample_rate=48000", sock=client, max_queue=1) as ws:
            await send(ws, {"type": "append", "text": " ".join(sentences)})
            await send(ws, {"type": "flush"})
            # not reading: synthesis must stop with the turn unfinished and nothing queued or running
            paused_at = await asyncio.to_thread(wait_for_pause, live)
            assert paused_at - turn_jobs < len(sentences)
            rss_paused = rss_bytes()
            # meanwhile another session is served in full, and the paused one stays paused: the only jobs
            # done while it was served were that session's own
            before = stats(live).completed
            await asyncio.to_thread(assert_serving, live)
            assert stats(live).completed - before == turn_jobs and stats(live).running == 0
            assert rss_bytes() - rss_paused < RSS_SLACK_BYTES
            events = await until(ws, of_type("flushed"))  # reading again resumes it
        segments = [m for m in messages(events) if m["type"] == "segment"]
        assert " ".join(s["text"] for s in segments) == " ".join(sentences)

    def wait_for_pause(live: LiveServer) -> int:
        last = -1
        while True:
            now = stats(live)
            if now.completed == last and now.running == 0 and now.queued == 0 and now.completed > 0:
                return now.completed
            last = now.completed
            time.sleep(1.5)

    sock = loopback_socket(send_buffer=4096)
    # uvicorn's keepalive would drop this silent client after 40 s (tested below); keep it out of the way
    no_keepalive = {"ws_ping_interval": None}
    # one job per segment (none windowed), so the scheduler's job count counts segments
    with serve_fake(
        sock=sock,
        uvicorn=no_keepalive,
        audio_high_water_s=1.0,
        audio_low_water_s=0.5,
        windowed_first=False,
    ) as live:
        run(lambda: main(live))


def test_a_reader_stalled_past_the_keepalive_is_dropped_without_an_internal_error(
    serve_fake: ServerFactory,
) -> None:
    """uvicorn closes the socket itself when its ping goes unanswered; the session must end cleanly then.

    (Sending after that raised uvicorn's ``RuntimeError`` from the session's writer: a 1011 and a traceback.)
    """

    async def main(live: LiveServer) -> None:
        client = socket.create_connection((LOOPBACK, live.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        url = live.ws_url + "/v1/stream?sample_rate=48000"
        async with connect(url, sock=client, max_queue=1, ping_interval=None) as ws:
            await send(ws, {"type": "append", "text": " ".join(f"Here is sentence {n}." for n in range(6))})
            await send(ws, {"type": "flush"})
            await asyncio.sleep(3.0)  # not reading, so not answering pings, for 3 x (ping interval + timeout)
            with pytest.raises(ConnectionClosed):
                while True:
                    await receive(ws)

    keepalive = {"ws_ping_interval": 0.5, "ws_ping_timeout": 0.5}
    sock = loopback_socket(send_buffer=4096)
    with (
        failures_logged() as failures,
        serve_fake(sock=sock, uvicorn=keepalive, audio_high_water_s=1.0, audio_low_water_s=0.5) as live,
    ):
        tasks = server_tasks(live)
        run(lambda: main(live))
        wait_idle(live, tasks)
        assert_serving(live)
    assert [record.getMessage() for record in failures] == []


def test_ping_and_every_route_answer_503_until_the_model_is_loaded(tmp_path: Path) -> None:
    settings = Settings(host=LOOPBACK, port=0, model_dir=tmp_path)  # an empty model directory never loads
    with run_server(create_app(settings), settings, wait_ready=False) as live:
        wait_for(lambda: live.runtime.load_error is not None, "the load to fail")
        ping = httpx.get(live.http_url + "/ping")
        assert ping.status_code == 503 and ping.json()["error"] == "not_ready"
        assert ping.json()["status"] == "failed" and "failed" in ping.json()["message"]
        assert str(tmp_path) not in ping.text and "/" not in ping.json()["message"]  # no key needed: no paths
        speech = httpx.post(live.http_url + "/invocations", json={"text": "Hi."})
        assert (speech.status_code, speech.json()["error"]) == (503, "not_ready")
        assert "failed" in speech.json()["message"] and str(tmp_path) not in speech.text

        async def session() -> None:
            async with connect(live.ws_url + "/v1/stream") as ws:
                error = await receive(ws)
                with pytest.raises(ConnectionClosed) as closed:
                    await receive(ws)
            assert isinstance(error, dict) and error["code"] == "not_ready"
            assert close_code(closed.value) == 1013

        run(session)


def test_a_voice_that_failed_to_load_is_named_on_ping_and_the_others_are_served() -> None:
    bank = fake_voices()
    tables = {name: bank.resolve(name) for name in bank.names() if name != "af_sky"}
    speech = Speech(FakeEngine(), VoiceBank(tables, ["af_sky"]), {lang: FakeG2P(lang) for lang in LANGS})
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(warm_app(settings, speech), settings) as live:
        ping = httpx.get(live.http_url + "/ping")
        assert ping.json() == {"status": "ready", "unavailable_voices": ["af_sky"]}
        refused = httpx.post(live.http_url + "/invocations", json={"text": "Hi.", "voice": "af_sky"})
        assert (refused.status_code, refused.json()["error"]) == (400, "unknown_voice")
        assert "unavailable" in refused.json()["message"]
        served = httpx.post(live.http_url + "/invocations", json={"text": "Hi.", "voice": "af_bella"})
        assert served.status_code == 200


def test_shutdown_closes_sessions_with_1012_and_finishes_within_the_grace(serve_fake: ServerFactory) -> None:
    async def main(live: LiveServer) -> None:
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(
                ws, {"type": "append", "text": "A sentence that will be cut off by the shutdown. " * 3}
            )
            await send(ws, {"type": "flush"})
            await until(ws, of_type("segment"))
            stopping = asyncio.create_task(asyncio.to_thread(live.stop, 30.0))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await receive(ws)
            await stopping
        assert close_code(closed.value) == 1012
        assert not live.thread.is_alive()

    with serve_fake(shutdown_grace_s=10.0) as live:
        run(lambda: main(live))
    assert not live.runtime.ready  # the lifespan's shutdown ran: new work is refused
