"""Split a phoneme string into pieces that fit the model's token window, only between words.

Kokoro's own pipeline truncates at 510 tokens (``ps[:510]``) and the rest of the text is lost; koe splits
instead, preferring a cut after punctuation, then at any space.
"""

from __future__ import annotations

from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens

_CLAUSE_END = ".!?;:,—…"


def split_phonemes(phonemes: str, max_tokens: int = MAX_PHONEME_TOKENS) -> list[str]:
    """Pieces of at most ``max_tokens`` tokens, cut between words; words are never split.

    A single "word" longer than the window (no spaces for 510 symbols: not English) is cut where it must be,
    since dropping it silently would be worse.
    """
    phonemes = " ".join(phonemes.split())
    pieces: list[str] = []
    while count_tokens(phonemes) > max_tokens:
        cut = _best_cut(phonemes, max_tokens)
        pieces.append(phonemes[:cut].strip())
        phonemes = phonemes[cut:].strip()
    if phonemes:
        pieces.append(phonemes)
    return pieces


def _best_cut(phonemes: str, max_tokens: int) -> int:
    """Where to cut: the last space in the window, preferably one after punctuation in its second half."""
    limit = _prefix_within(phonemes, max_tokens)
    spaces = [i for i in range(1, limit + 1) if i < len(phonemes) and phonemes[i] == " "]
    if not spaces:
        return limit
    after_clause = [i for i in spaces if phonemes[i - 1] in _CLAUSE_END and i > limit // 2]
    return (after_clause or spaces)[-1]


def _prefix_within(phonemes: str, max_tokens: int) -> int:
    """Length of the longest prefix holding at most ``max_tokens`` tokens."""
    tokens = 0
    for index, symbol in enumerate(phonemes):
        tokens += count_tokens(symbol)
        if tokens > max_tokens:
            return index
    return len(phonemes)
