"""What a client may set for speech — speed and accent — validated without loading anything heavy.

The server's sans-I/O protocol and request parsers use these, so they must not import the engine.
"""

from __future__ import annotations

import reprlib

from koe.engine.voices import AMERICAN, BRITISH
from koe.errors import ConfigError

MIN_SPEED = 0.5
MAX_SPEED = 2.0
LANGS = (AMERICAN, BRITISH)


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
    if lang not in LANGS:
        raise ConfigError(f"lang must be one of {', '.join(LANGS)}, got {reprlib.repr(lang)}")
    return str(lang)
