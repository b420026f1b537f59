"""Test helpers shared across test modules (imported as ``support``; tests/ is on pytest's pythonpath)."""

from __future__ import annotations

from koe_bench.asr import Transcriber, word_error_rate, words

__all__ = ["Transcriber", "word_error_rate", "words"]
