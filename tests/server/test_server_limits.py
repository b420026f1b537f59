"""Admission, overload, backpressure, disconnects, readiness and shutdown, each on its own live server."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from koe.scheduler.queue import SchedulerStats
from koe.server.app import create_app
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, ServerFactory, loopback_socket, run_server
from ws_events import WAIT_S, messages, of_type, receive, run, send, until


class Gate:
    """A real job that holds a scheduler worker until released: makes saturation deterministic."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self) -> None:
        self.release.wait(WAIT_S)


def stats(live: LiveServer) -> SchedulerStats:
    return live.call(lambda: live.runtime.scheduler.stats)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def close_code(closed: ConnectionClosed) -> int | None:
    return closed.rcvd.code if closed.rcvd is not None else None


def test_a_saturated_queue_refuses_new_work_with_a_retry_hint(serve_app: ServerFactory) -> None:
    with serve_app(workers=1, max_queued_jobs=1) as live:
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


def test_sessions_over_the_limit_are_refused_with_1013(serve_app: ServerFactory) -> None:
    async def main(live: LiveServer) -> None:
        async with connect(live.ws_url + "/v1/stream") as first:
            await send(first, {"type": "cancel"})
            await receive(first)  # the first session is admitted and running
            async with connect(live.ws_url + "/v1/stream") as second:
                error = await receive(second)
                with pytest.raises(ConnectionClosed) as closed:
                    await receive(second)
            assert isinstance(error, dict) and error["code"] == "too_many_sessions"
            assert close_code(closed.value) == 1013
            await send(first, {"type": "cancel"})  # the admitted session is unaffected
            assert await receive(first) == {"type": "cancelled", "turn": 1}

    with serve_app(max_sessions=1) as live:
        run(lambda: main(live))


def test_a_disconnect_mid_turn_drains_the_queue_and_frees_the_session(koe_server: LiveServer) -> None:
    text = " ".join(f"This is sentence number {n} of the answer." for n in range(1, 7))

    def metric(name: str) -> float:
        for line in httpx.get(koe_server.http_url + "/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not exported")

    completed = 'koe_jobs_total{outcome="completed"}'
    before = metric(completed)

    async def main() -> None:
        ws = await connect(koe_server.ws_url + "/v1/stream")
        await send(ws, {"type": "append", "text": text})
        await send(ws, {"type": "flush"})
        await until(ws, of_type("segment"))
        ws.transport.abort()  # no close handshake: the client just vanishes

    run(main)
    wait_for(lambda: metric("koe_queue_depth") == 0 and metric("koe_jobs_running") == 0, "the queue to drain")
    wait_for(lambda: metric('koe_active_sessions{transport="ws"}') == 0, "the session to end")
    assert metric(completed) - before < 6  # the rest of the answer was never synthesized


def test_a_client_that_stops_reading_pauses_its_own_synthesis(serve_app: ServerFactory) -> None:
    """Small socket buffers make the pause come after a few seconds of audio instead of megabytes."""
    sentences = [f"Here is sentence {n}." for n in range(1, 7)]

    async def main(live: LiveServer) -> None:
        client = socket.create_connection((LOOPBACK, live.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        async with connect(live.ws_url + "/v1/stream?sample_rate=48000", sock=client, max_queue=1) as ws:
            await send(ws, {"type": "append", "text": " ".join(sentences)})
            await send(ws, {"type": "flush"})
            # not reading: synthesis must stop with the turn unfinished and nothing queued or running
            paused_at = await asyncio.to_thread(wait_for_pause, live)
            assert paused_at < len(sentences)
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
    with serve_app(sock=sock, audio_high_water_s=1.0, audio_low_water_s=0.5) as live:
        run(lambda: main(live))


def test_ping_and_every_route_answer_503_until_the_model_is_loaded(tmp_path: Path) -> None:
    settings = Settings(host=LOOPBACK, port=0, model_dir=tmp_path)  # an empty model directory never loads
    with run_server(create_app(settings), settings, wait_ready=False) as live:
        wait_for(lambda: live.runtime.load_error is not None, "the load to fail")
        ping = httpx.get(live.http_url + "/ping")
        assert ping.status_code == 503 and ping.json()["error"] == "not_ready"
        assert ping.json()["message"]
        speech = httpx.post(live.http_url + "/invocations", json={"text": "Hi."})
        assert (speech.status_code, speech.json()["error"]) == (503, "not_ready")

        async def session() -> None:
            async with connect(live.ws_url + "/v1/stream") as ws:
                error = await receive(ws)
                with pytest.raises(ConnectionClosed) as closed:
                    await receive(ws)
            assert isinstance(error, dict) and error["code"] == "not_ready"
            assert close_code(closed.value) == 1013

        run(session)


def test_shutdown_closes_sessions_with_1012_and_finishes_within_the_grace(serve_app: ServerFactory) -> None:
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

    with serve_app(shutdown_grace_s=10.0) as live:
        run(lambda: main(live))
    assert not live.runtime.ready  # the lifespan's shutdown ran: new work is refused
