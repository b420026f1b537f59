"""A turn's voice, resolved once: the style table, the language, the speed and the caller's lexicon every
segment is spoken with."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from koe.engine.voices import VoiceBank
from koe.pipeline.lexicon import Lexicon
from koe.types import StyleTable
from koe.wire.params import validate_lang, validate_speed


@dataclass(frozen=True, slots=True)
class Voice:
    """A resolved voice: the style table is looked up once per turn, not per segment.

    ``style_digest`` names the table's contents, so two specs that resolve to the same table (``a(2)+b(1)``
    and ``a(4)+b(2)``) are one voice to the segment cache, and two blends of different weights are not.
    """

    spec: str
    style: StyleTable
    lang: str
    speed: float
    style_digest: str
    lexicon: Lexicon | None = None  # the caller's, consulted before the server's (koe.pipeline.lexicon)


def style_digest(style: StyleTable) -> str:
    """A digest of a style table's float32 bytes (one hash over 510 × 256 floats: cheap beside a decode)."""
    return hashlib.sha256(np.ascontiguousarray(style, dtype=np.float32).tobytes()).hexdigest()


def resolve_voice(
    voices: VoiceBank, spec: str, speed: float = 1.0, lang: str | None = None, lexicon: Lexicon | None = None
) -> Voice:
    """Raises ``VoiceError`` (listing the valid names) for an unknown voice, a malformed blend or one mixing
    languages, and ``ConfigError`` for a speed out of range or an unknown language."""
    style = voices.resolve(spec)
    language = validate_lang(lang) if lang else voices.lang_of(spec)
    return Voice(spec, style, language, validate_speed(speed), style_digest(style), lexicon)
