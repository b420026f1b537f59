"""The hostile text of issue 31 that the pipeline and server tests share: a number thousands of digits long,
what a voice of each language says it with, and how long its cancelled job may keep a worker.

Imported as ``long_numbers`` (tests/ is on pytest's path).
"""

from __future__ import annotations

from koe.engine.voices import VOICES
from koe.languages import language, of_voice

#: The reported text: a price whose decimals run on for 4,400 digits.
LONG_NUMBER = f"Total $1.{'5' * 4400} ok."
#: How long a cancelled or abandoned turn may keep its worker.
FREED_WITHIN_S = 1.0


def voice_of(lang: str) -> str:
    """A voice that speaks ``lang``."""
    return next(voice for voice in VOICES if of_voice(voice) == language(lang))
