"""A turn's voice, resolved once: the style table, the accent and the speed every segment is spoken with."""

from __future__ import annotations

from dataclasses import dataclass

from koe.engine.voices import VoiceBank
from koe.pipeline.params import validate_lang, validate_speed
from koe.types import StyleTable


@dataclass(frozen=True, slots=True)
class Voice:
    """A resolved voice: the style table is looked up once per turn, not per segment."""

    spec: str
    style: StyleTable
    lang: str
    speed: float


def resolve_voice(voices: VoiceBank, spec: str, speed: float = 1.0, lang: str | None = None) -> Voice:
    """Raises ``VoiceError`` (listing the valid names) for an unknown voice or a malformed blend, and
    ``ConfigError`` for a speed or accent out of range."""
    style = voices.resolve(spec)
    return Voice(spec, style, validate_lang(lang) if lang else voices.lang_of(spec), validate_speed(speed))
