"""What a client may set for speech — speed and language — validated without loading anything heavy.

The server's sans-I/O protocol and request parsers use these, so they must not import the engine.
"""

from __future__ import annotations

import math

from koe.errors import ConfigError
from koe.languages import CODES, language

MIN_SPEED = 0.5
MAX_SPEED = 2.0
#: Every ``lang`` koe speaks (:mod:`koe.languages`).
LANGS = CODES


def validate_speed(speed: object) -> float:
    """A finite speed in [MIN_SPEED, MAX_SPEED]; raises ``ConfigError`` naming the range otherwise."""
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not math.isfinite(speed):
        raise ConfigError(f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}, got {speed!r}")
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ConfigError(f"speed must be from {MIN_SPEED} to {MAX_SPEED}, got {speed}")
    return float(speed)


def validate_lang(lang: object) -> str:
    """koe's code for ``lang`` (aliases such as ``en``, ``pt``, ``ja-JP`` folded); raises ``ConfigError``
    listing the codes for anything else."""
    return language(lang).code
