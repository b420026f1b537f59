"""The G2P interface: English text → Kokoro phoneme string."""

from __future__ import annotations

from typing import Protocol

from koe.engine.timing import WordSpan


class G2P(Protocol):
    lang: str

    def phonemize(self, text: str) -> str:
        """Phonemes for ``text`` (any length); symbols for words it cannot read are dropped, not guessed."""
        ...

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """Phonemes as :meth:`phonemize` gives them, and where each word of ``text`` is spoken in them."""
        ...
