"""What a client may set for speech — speed and language — validated without loading anything heavy.

Every transport's parser and the pipeline's voice resolution use these; they live in :mod:`koe.wire` so
that parsing a request never imports the engine or the pipeline.
"""

from __future__ import annotations

import reprlib

from koe.errors import ConfigError
from koe.languages import CODES, language

MIN_SPEED = 0.5
MAX_SPEED = 2.0
#: Every ``lang`` koe speaks (:mod:`koe.languages`).
LANGS = CODES


def validate_speed(speed: object) -> float:
    """A speed in [MIN_SPEED, MAX_SPEED]; raises ``ConfigError`` naming the range (and a bounded preview of
    what came) otherwise."""
    # compared before any conversion: a 400-digit integer compares exactly but overflows float(); NaN fails
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not MIN_SPEED <= speed <= MAX_SPEED:
        raise ConfigError(
            f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}, got {reprlib.repr(speed)}"
        )
    return float(speed)


def validate_lang(lang: object) -> str:
    """koe's code for ``lang`` (aliases such as ``en``, ``pt``, ``ja-JP`` folded); raises ``ConfigError``
    listing the codes for anything else (and a bounded preview of what came)."""
    return language(lang).code
