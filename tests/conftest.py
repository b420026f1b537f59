"""Shared fixtures. Loading the model takes seconds, so one ``Speech`` and one ASR model serve the session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koe.speech import Speech, SpeechOptions
from support import Transcriber


@pytest.fixture(scope="session")
def speech() -> Iterator[Speech]:
    """The one loaded engine (model, 28 voices, American and British G2P) for every model test."""
    yield Speech.load(SpeechOptions(threads=2))


@pytest.fixture(scope="session")
def transcribe() -> Transcriber:
    return Transcriber()


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """Tests that use the loaded engine are marked ``model`` automatically."""
    for item in items:
        if "speech" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
