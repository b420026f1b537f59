"""Test helpers shared across test modules (imported as ``support``; tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import re

from koe.bench.asr import Transcriber

__all__ = ["Transcriber", "words"]


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: what transcripts are compared on."""
    return re.findall(r"[a-z0-9']+", text.lower().replace("-", " "))
