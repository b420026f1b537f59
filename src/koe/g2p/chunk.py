"""Where G2P's input and output are cut: a text into chunks read one at a time, phonemes into the model's
token window, both only between words.

A G2P call cannot be interrupted, so a text is read a chunk of at most :data:`G2P_CHUNK_CHARS` at a time
and a cancel takes effect between chunks; chunks also bound the cost of a G2P whose work grows faster than
its input. Kokoro's own pipeline truncates phonemes at 510 tokens (``ps[:510]``) and the rest of the text
is lost; koe splits instead. Both prefer a cut after punctuation, then at any space.
"""

from __future__ import annotations

import re

from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens

_CLAUSE_END = ".!?;:,—…"
#: English characters G2P reads in one call at most (a language's own characters weigh more: ja, zh, hi):
#: a segment (``SegmenterOptions.max_chars``) is read whole, unless normalizing made it longer.
G2P_CHUNK_CHARS = 400
#: English characters a call when a text does not fit in one (only a segment normalizing lengthened, such as
#: a number read digit by digit): smaller calls, so that a cancel reaches it sooner.
G2P_LONG_CHUNK_CHARS = 100
#: Where a text may be cut for G2P, best first: after a sentence's end, after a clause's, at a space.
#: A Latin mark ends something only before a space ("3.14", "1,234" are numbers); a CJK one always does.
_TEXT_CUTS = (
    re.compile(r"[.!?…]+\s+|[。！？।]+\s*"),
    re.compile(r"[,;:—]+\s+|[，；：、]+\s*"),
    re.compile(r"\s+"),
)


def split_text(text: str, max_chars: int = G2P_CHUNK_CHARS) -> list[tuple[int, int]]:
    """``[start, end)`` spans that cover ``text`` in order, each at most ``max_chars`` long, cut where
    :data:`_TEXT_CUTS` allow (a "word" longer than ``max_chars``, not speech, is cut where it must be).
    Linear in ``len(text)``."""
    chunks: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > max_chars:
        end = _text_cut(text, start, start + max_chars)
        chunks.append((start, end))
        start = end
    chunks.append((start, len(text)))
    return chunks


def _text_cut(text: str, start: int, stop: int) -> int:
    """Where to end a chunk starting at ``start`` and ending by ``stop``: the best kind of cut in the
    window's second half, else the last cut of any kind, else ``stop``."""
    ends = [[match.end() for match in cut.finditer(text, start + 1, stop)] for cut in _TEXT_CUTS]
    half = start + (stop - start) // 2
    for found in ends:
        if found and found[-1] > half:
            return found[-1]
    return max((found[-1] for found in ends if found), default=stop)


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
