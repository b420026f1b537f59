"""Shared fixtures. Loading the model takes seconds, so one ``Speech``, one ASR model and one real server
(uvicorn on a free loopback port, sharing that ``Speech``) serve the whole test session. Tests of the
protocol, sessions, turns, the scheduler and admission use a server on the scripted fake engine instead
(``fake_server``, ``serve_fake``), which starts and speaks in milliseconds."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from koe.app import create_app
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, ServerFactory, run_server
from support import Transcriber
from support.fake import FakeEngine, fake_speech
from support.warm import warm_app
from support.workers import one_worker_at_a_time


def pytest_configure(config: pytest.Config) -> None:
    """OpenMP's threads (torch's) spin after each parallel region by default, holding their core while
    another worker's threads wait for it: here they wait passively, in this process and the ones it starts.
    Runs before any test module imports torch (OpenMP reads the setting when it is loaded); a value already
    set is kept."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def speech() -> Iterator[Speech]:
    """The one loaded engine (model, all 54 voices; each language's G2P built on first use) for every model
    test."""
    yield Speech.load(SpeechOptions.from_settings(Settings(threads_per_worker=2)))


@pytest.fixture(scope="session")
def torch_speech(speech: Speech, tmp_path_factory: pytest.TempPathFactory) -> Speech:
    """The PyTorch engine on CPU with the weights derived from the int8 model (derived into koe's cache
    once, then reused), behind the shared ``speech``'s voices and G2P."""
    pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
    pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")
    from koe.conversion.install import install
    from koe.engine.torch import TorchEngine, TorchOptions

    with one_worker_at_a_time(tmp_path_factory, "torch-weights"):  # the first derives, the others read
        weights = install("derived")
    engine = TorchEngine.load(weights, TorchOptions(device="cpu", max_batch=4, threads=2))
    return speech.with_engine(engine)


@pytest.fixture(scope="session")
def transcribe() -> Transcriber:
    return Transcriber()


def _factory(speech: Speech) -> ServerFactory:
    @contextmanager
    def start(
        sock: socket.socket | None = None, uvicorn: dict[str, Any] | None = None, **overrides: Any
    ) -> Iterator[LiveServer]:
        # no segment cache unless asked for: tests share servers, and a hit from another test's turn would
        # make this one's synthesis instant (tests/pipeline/test_cache.py and tests/server/test_cache_*.py);
        # no admission by the machine's speed, whose meter would charge the test process's other work (the
        # ASR, other servers) to this server's audio (tests/server/test_server_capacity.py scripts it)
        defaults = {"host": LOOPBACK, "port": 0, "segment_cache_mb": 0, "capacity_share": 0.0}
        settings = Settings(**{**defaults, **overrides})
        with run_server(warm_app(settings, speech), settings, sock, **(uvicorn or {})) as live:
            yield live

    return start


@pytest.fixture(scope="session")
def serve_app(speech: Speech) -> ServerFactory:
    """Start another server sharing the loaded model, with its own settings: ``with serve_app(**limits)``.

    Warm-up is off (the shared model is warm: :func:`support.warm.warm_app`), and so is the segment cache
    unless asked for; ``sock`` passes a prepared socket and ``uvicorn`` options of uvicorn's own (its
    keepalive ping...).
    """
    return _factory(speech)


@pytest.fixture(scope="session")
def koe_server(speech: Speech) -> Iterator[LiveServer]:
    """The shared server with default limits (warm-up on, so its cost model is fitted as in production), but
    no segment cache (its tests would hear each other's segments) and no admission by the machine's speed
    (the test process's other work would be charged to its audio)."""
    settings = Settings(host=LOOPBACK, port=0, segment_cache_mb=0, capacity_share=0.0)
    with run_server(create_app(settings, speech), settings) as live:
        yield live


@pytest.fixture(scope="session")
def serve_fake() -> ServerFactory:
    """Start a server on the fake engine: ``with serve_fake(engine=FakeEngine(delay_s=0.05), **limits)``."""

    @contextmanager
    def start(engine: FakeEngine | None = None, **overrides: Any) -> Iterator[LiveServer]:
        with _factory(fake_speech(engine))(**overrides) as live:
            yield live

    return start


@pytest.fixture(scope="session")
def fake_server() -> Iterator[LiveServer]:
    """A server with default limits on the fake engine, shared by the protocol tests."""
    with _factory(fake_speech())() as live:
        yield live


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """Tests using the loaded engine are marked ``model``; those using a live server also ``server``. Runs
    before ``-m`` selects, so ``-m "not model"`` leaves them out."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if {"speech", "torch_speech"} & set(names):
            item.add_marker(pytest.mark.model)
        if {"koe_server", "serve_app", "fake_server", "serve_fake"} & set(names):
            item.add_marker(pytest.mark.server)
