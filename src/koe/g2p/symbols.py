"""Phoneme symbols the model knows: what a G2P produces outside Kokoro's vocabulary is reported, then removed.

The tokenizer would drop such symbols without a word; a G2P (espeak-ng above all) can emit them for rare
sounds, and a listener then hears a word with a sound missing. Each G2P passes its output through
:func:`keep_known`, so the loss is logged once per symbol and language, naming the word.
"""

from __future__ import annotations

import logging
import threading

from koe.engine.vocab import vocabulary

logger = logging.getLogger(__name__)

_reported: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def unknown_symbols(phonemes: str) -> list[str]:
    """The distinct symbols of ``phonemes`` outside the model's vocabulary, in order of appearance."""
    vocab = vocabulary()
    return list(dict.fromkeys(symbol for symbol in phonemes if symbol not in vocab and symbol != " "))


def keep_known(phonemes: str, lang: str, word: str) -> str:
    """``phonemes`` without the symbols the model lacks; a symbol new to ``lang`` is logged (with the length
    of ``word``, never the word)."""
    unknown = unknown_symbols(phonemes)
    if not unknown:
        return phonemes
    with _reported_lock:
        new = [symbol for symbol in unknown if (symbol, lang) not in _reported]
        _reported.update((symbol, lang) for symbol in new)
    if new:
        logger.warning(
            "%s G2P made phonemes the model does not know (%s) for a word of %d characters: left out",
            lang,
            " ".join(f"U+{ord(symbol):04X}" for symbol in new),
            len(word),
        )
    drop = set(unknown)
    return "".join(symbol for symbol in phonemes if symbol not in drop)
