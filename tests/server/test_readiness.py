"""Readiness and shutdown as SageMaker sees them: ``/ping`` while the model loads and after, and SIGTERM to a
``koe serve`` process with a stream and a session in flight (the fake engine stands in for the model)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from koe.app import create_app
from koe.errors import AssetError, UpstreamError
from koe.g2p.registry import G2PRegistry
from koe.pipeline import speech as speech_module
from koe.pipeline.speech import Speech
from koe.server import measurement
from koe.server.measurement import TIMED
from koe.server.runtime import load_in_background, load_proven
from koe.settings import Settings
from koe_bench.target import wait_ready
from live_checks import close_code, metric, wait_for
from live_server import LOOPBACK, ServerFactory, run_server
from support.fake import FakeEngine, fake_speech
from support.fake_serve import fake_serve_process
from support.warm import warm_app
from ws_events import WAIT_S, of_type, receive, run, send, until

#: What uvicorn is given to drain in; the process must be gone well within it.
GRACE_S = 10.0
#: Each fake engine call's time in the served process (a segment each): the answer takes over a second.
ENGINE_CALL_S = 0.4
STREAMED = " ".join(f"Sentence number {n} is still being spoken when the server stops." for n in range(3))


def test_ping_is_503_not_ready_while_the_model_loads_then_200() -> None:
    """The warm-up's first synthesis is held: the load is observably in progress while /ping answers."""
    loading = threading.Event()
    engine = FakeEngine(gate=loading)
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(create_app(settings, fake_speech(engine)), settings, wait_ready=False) as live:
        wait_for(lambda: engine.calls > 0, "the warm-up to reach the engine")
        ping = httpx.get(live.http_url + "/ping")
        assert (ping.status_code, ping.json()) == (
            503,
            {"status": "loading", "error": "not_ready", "message": "the model is still loading"},
        )
        speech = httpx.post(live.http_url + "/invocations", json={"text": "Hi."})
        assert (speech.status_code, speech.json()["error"]) == (503, "not_ready")
        loading.set()
        wait_for(lambda: httpx.get(live.http_url + "/ping").status_code == 200, "the load to finish")
        assert httpx.get(live.http_url + "/ping").json() == {"status": "ready"}
        body = {"text": "Hi.", "format": "pcm"}
        pcm = httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S)
        assert pcm.status_code == 200 and len(pcm.content) == fake_speech().synthesize("Hi.").size * 2


def test_a_model_already_loading_when_the_server_starts_is_the_one_it_serves() -> None:
    """``koe serve`` starts loading before it imports the web stack; the server waits for that load."""
    loading: Future[Speech] = Future()
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(warm_app(settings, loading=loading), settings, wait_ready=False) as live:
        assert httpx.get(live.http_url + "/ping").json()["status"] == "loading"
        loading.set_result(fake_speech())
        wait_for(lambda: httpx.get(live.http_url + "/ping").status_code == 200, "the load to finish")
        body = {"text": "Hi.", "format": "pcm"}
        pcm = httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S)
        assert pcm.status_code == 200 and len(pcm.content) == fake_speech().synthesize("Hi.").size * 2


def test_a_model_the_server_loaded_is_out_of_the_collectors_sight_once_ready_one_handed_in_is_not() -> None:
    """What the load left is frozen (``gc.get_objects`` no longer lists it), so the collector's oldest
    generation stops walking it; a caller's model (tests, benchmarks in process) stays the caller's."""
    settings = Settings(host=LOOPBACK, port=0)
    gc.unfreeze()
    try:
        handed_in = fake_speech()
        with run_server(create_app(settings, handed_in), settings):
            assert any(tracked is handed_in.voices for tracked in gc.get_objects())
        loading: Future[Speech] = Future()
        loaded = fake_speech()
        loading.set_result(loaded)
        with run_server(warm_app(settings, loading=loading), settings):
            assert gc.get_freeze_count() > 0
            assert not any(tracked is loaded.voices for tracked in gc.get_objects())
    finally:
        gc.unfreeze()


def test_a_first_start_is_ready_once_proven_then_measures_its_costs_while_idle_and_a_later_start_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(measurement, "QUIET_S", 0.02)  # the production quiet time, shortened
    held = threading.Event()
    engine = FakeEngine(gate=held)  # every decode waits: readiness must need none
    loading: Future[Speech] = Future()
    loading.set_result(fake_speech(engine))
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(create_app(settings, loading=loading), settings) as live:
        assert metric(live, "koe_costs_measured") == 0  # speaking from the defaults
        wait_for(lambda: engine.calls == 1, "the first timed utterance, after readiness")
        held.set()
        wait_for(lambda: metric(live, "koe_costs_measured") == 1, "the costs to be measured")
        assert engine.worked == [fake_speech().phonemize(text)[0] for text in TIMED]
    later = FakeEngine()
    loading = Future()
    loading.set_result(fake_speech(later))
    with run_server(create_app(settings, loading=loading), settings) as live:
        assert metric(live, "koe_costs_measured") == 1 and later.calls == 0  # kept: nothing to measure


def test_a_first_start_told_to_measure_before_ready_has_measured_when_ping_turns_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    engine = FakeEngine()
    loading: Future[Speech] = Future()
    loading.set_result(fake_speech(engine))
    settings = Settings(host=LOOPBACK, port=0, measure_after_ready=False)
    with run_server(create_app(settings, loading=loading), settings) as live:
        assert metric(live, "koe_costs_measured") == 1
        assert engine.worked == [fake_speech().phonemize(text)[0] for text in TIMED]


def test_a_load_started_before_the_server_that_fails_is_reported_by_ping(tmp_path: Path) -> None:
    settings = Settings(host=LOOPBACK, port=0, model_dir=tmp_path / "no such model")
    loading = load_in_background(settings)
    assert isinstance(loading.exception(timeout=WAIT_S), AssetError)
    with run_server(create_app(settings, loading=loading), settings, wait_ready=False) as live:
        wait_for(lambda: httpx.get(live.http_url + "/ping").json()["status"] == "failed", "the failure")
        ping = httpx.get(live.http_url + "/ping")
        assert ping.status_code == 503 and "AssetError" in ping.json()["message"]
        # a benchmark waiting for it gives up at once rather than at its timeout
        with pytest.raises(UpstreamError, match="failed to load"):
            wait_ready(live.http_url, timeout_s=WAIT_S * 10)


def test_ping_says_shutting_down_not_loading_once_the_server_has_closed(serve_fake: ServerFactory) -> None:
    with serve_fake() as live:
        assert httpx.get(live.http_url + "/ping").status_code == 200
    # the lifespan's shutdown ran; uvicorn no longer listens, so ask the app itself (as a loopback host,
    # which the Host check lets through)
    transport = httpx.ASGITransport(app=live.app)

    async def ping() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{LOOPBACK}") as client:
            return await client.get("/ping")

    response = asyncio.run(ping())
    assert response.status_code == 503
    assert response.json() == {
        "status": "stopping",
        "error": "shutting_down",
        "message": "the server is shutting down",
    }


def _fake_serve(log: Path) -> AbstractContextManager[tuple[subprocess.Popen[bytes], str]]:
    # no segment cache: the undisturbed request would store its segments and the drained one replay them;
    # no windows: each window would be an engine call of its own
    settings = {
        "KOE_SHUTDOWN_GRACE_S": str(GRACE_S),
        "KOE_SEGMENT_CACHE_MB": "0",
        "KOE_WINDOWED_FIRST": "false",
    }
    return fake_serve_process(log, delay_s=ENGINE_CALL_S, settings=settings)


@pytest.mark.slow
@pytest.mark.server
def test_sigterm_drains_an_http_stream_in_flight_and_closes_sessions_with_1012(tmp_path: Path) -> None:
    body = {"text": STREAMED, "format": "pcm", "stream": True}
    log = tmp_path / "serve.log"
    with _fake_serve(log) as (server, url):
        whole = httpx.post(url + "/invocations", json=body, timeout=WAIT_S).content  # the same, undisturbed

        async def main() -> tuple[bytes, int, int | None]:
            async with (
                httpx.AsyncClient(timeout=WAIT_S) as client,
                client.stream("POST", url + "/invocations", json=body) as response,
                connect(url.replace("http", "ws", 1) + "/v1/stream") as ws,
            ):
                chunks = response.aiter_bytes()
                before = await anext(chunks)
                await send(ws, {"type": "append", "text": STREAMED})
                await send(ws, {"type": "flush"})
                await until(ws, of_type("segment"))
                server.send_signal(signal.SIGTERM)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await receive(ws)
                after = b"".join([chunk async for chunk in chunks])
            return before + after, len(after), close_code(closed.value)

        streamed, after_sigterm, ws_code = run(main)
        assert ws_code == 1012
        # the stream went on after SIGTERM, to its end: uvicorn cuts what is still open after the grace
        assert after_sigterm > 0 and streamed == whole
        # uvicorn re-raises the signal after its graceful shutdown: the status of any SIGTERM-stopped process
        assert server.wait(GRACE_S) == -signal.SIGTERM
    text = log.read_text()
    assert "Application shutdown complete" in text and "Traceback" not in text


def test_shutdown_answers_a_request_whose_chunked_body_is_still_trickling_503_at_once(
    serve_fake: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The body would never end: shutdown answers ``shutting_down`` at once, not a 500 after the grace."""
    grace_s = 30.0
    with (
        caplog.at_level(logging.INFO),
        serve_fake(shutdown_grace_s=grace_s, body_timeout_s=2 * grace_s) as live,
    ):
        sock = socket.create_connection((LOOPBACK, live.port))
        sock.sendall(
            f"POST /invocations HTTP/1.1\r\nHost: {LOOPBACK}:{live.port}\r\n"
            'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{"\r\n'.encode()
        )
        wait_for(lambda: bool(live.server.server_state.tasks), "the request to reach the application")
        sock.sendall(b"4\r\ntext\r\n")  # still trickling
        started = time.monotonic()
        live.server.should_exit = True  # what uvicorn's SIGTERM handler does
        sock.settimeout(grace_s / 2)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        waited_s = time.monotonic() - started
        sock.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head.lower()
    assert json.loads(body)["error"] == "shutting_down"
    assert waited_s < grace_s / 10
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("lazy", [False, True], ids=["default", "lazy"])
def test_the_server_builds_every_installed_languages_g2p_before_it_is_ready_unless_lazy(
    monkeypatch: pytest.MonkeyPatch, lazy: bool
) -> None:
    """A G2P built on its first use holds the GIL, and so every session's event loop, for up to seconds."""
    built: list[tuple[str, ...]] = []

    def build(registry: G2PRegistry, langs: tuple[str, ...]) -> float:
        built.append(langs)
        return 0.0

    monkeypatch.setattr(speech_module, "_build_g2p", build)
    monkeypatch.setattr(speech_module, "load_engine", lambda options, source: FakeEngine())
    load_proven(Settings(lazy_g2p=lazy), prove=False)
    assert built == [("en-us",) if lazy else G2PRegistry().installed()]
    assert lazy or len(built[0]) > 1
