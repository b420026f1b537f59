"""Shared fixtures. Loading the model takes seconds, so one ``Speech``, one ASR model and one real server
(uvicorn on a free loopback port, sharing that ``Speech``) serve the whole test session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from koe.server.app import create_app
from koe.settings import Settings
from koe.speech import Speech, SpeechOptions
from live_server import LOOPBACK, LiveServer, ServerFactory, run_server
from support import Transcriber


@pytest.fixture(scope="session")
def speech() -> Iterator[Speech]:
    """The one loaded engine (model, 28 voices, American and British G2P) for every model test."""
    yield Speech.load(SpeechOptions(threads=2))


@pytest.fixture(scope="session")
def transcribe() -> Transcriber:
    return Transcriber()


@pytest.fixture(scope="session")
def serve_app(speech: Speech) -> ServerFactory:
    """Start another server sharing the loaded model, with its own settings: ``with serve_app(**limits)``.

    Warm-up is off (the shared model is warm) unless asked for; ``sock`` passes a prepared socket and
    ``uvicorn`` options of uvicorn's own (its keepalive ping...).
    """

    @contextmanager
    def start(
        sock: socket.socket | None = None, uvicorn: dict[str, Any] | None = None, **overrides: Any
    ) -> Iterator[LiveServer]:
        settings = Settings(**{"host": LOOPBACK, "port": 0, "warmup": False, **overrides})
        with run_server(create_app(settings, speech), settings, sock, **(uvicorn or {})) as live:
            yield live

    return start


@pytest.fixture(scope="session")
def koe_server(speech: Speech) -> Iterator[LiveServer]:
    """The shared server with default limits (warm-up on, so its cost model is fitted as in production)."""
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(create_app(settings, speech), settings) as live:
        yield live


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """Tests using the loaded engine are marked ``model``; those using a live server also ``server``."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "speech" in names:
            item.add_marker(pytest.mark.model)
        if "koe_server" in names or "serve_app" in names:
            item.add_marker(pytest.mark.server)
