"""Test helpers shared across test modules (imported as ``support``; tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import re

from koe.bench.asr import Transcriber

__all__ = ["Transcriber", "words"]


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: what transcripts are compared on."""
    return re.findall(r"[a-z0-9']+", text.lower().replace("-", " "))


def word_error_rate(reference: str, heard: str) -> float:
    """Word-level edit distance over the reference's length, on :func:`words` of both."""
    ref, hyp = words(reference), words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (word != other))
    return row[-1] / max(len(ref), 1)
