"""The G2P interface: text of one language → Kokoro phoneme string, with where each word is spoken."""

from __future__ import annotations

from typing import Protocol

from koe.engine.timing import WordSpan


class G2P(Protocol):
    """One language's reader. Implementations are safe to call from several threads.

    Symbols the model's vocabulary lacks are removed and reported (logged with the word they came from,
    :func:`koe.g2p.symbols.keep_known`), never passed on to be dropped silently by the tokenizer.
    """

    lang: str

    def phonemize(self, text: str) -> str:
        """Phonemes for ``text`` (any length); words it cannot read have no phonemes."""
        ...

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """Phonemes as :meth:`phonemize` gives them, and where each word of ``text`` is spoken in them
        (for CJK, a word is what the language's tokenizer calls one: its characters in ``text``)."""
        ...
