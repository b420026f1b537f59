"""The G2P interface: English text → Kokoro phoneme string."""

from __future__ import annotations

from typing import Protocol


class G2P(Protocol):
    lang: str

    def phonemize(self, text: str) -> str:
        """Phonemes for ``text`` (any length); symbols for words it cannot read are dropped, not guessed."""
        ...
