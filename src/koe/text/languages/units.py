"""The units the first-clause rule counts where words do not work: morae, characters, Devanagari words.

"Three words" means nothing in Japanese or Mandarin, which are written without spaces. A Japanese mora
(one kana, roughly) is the language's unit of timing; Mandarin speaks one syllable per character. Each
function returns where each unit starts, a position listed twice for a unit that weighs two.
"""

from __future__ import annotations

import re

_KANA = "\u3041-\u3096\u30a1-\u30fa\u30fc"
#: Small kana join the kana before them into one mora (きょ is one mora, きよ two).
_SMALL_KANA = frozenset("ぁぃぅぇぉゃゅょゎァィゥェォャュョヮ")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005"
#: Devanagari's vowel signs and marks belong to the word they are in (Python's \w leaves them out).
_DEVANAGARI_MARKS = "\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
_LATIN_WORD = rf"(?:(?![{_KANA}{_HAN}])[^\W_])+"
_JAPANESE_UNIT = re.compile(rf"(?P<han>[{_HAN}])|(?P<kana>[{_KANA}])|{_LATIN_WORD}")
_HIRAGANA = re.compile("[\u3041-\u3096]")
_MANDARIN_UNIT = re.compile(rf"[{_HAN}]|{_LATIN_WORD}")
_HINDI_WORD = re.compile(rf"(?:[^\W_]|[{_DEVANAGARI_MARKS}])+")
#: A kanji is read with 1-3 morae, ~2 in running text (今日 kyō: 2, 東京 tōkyō: 4 for two).
MORAE_PER_KANJI = 2


def japanese_morae(text: str) -> list[int]:
    """Morae: each kana not small, each kanji :data:`MORAE_PER_KANJI` times, a Latin word or number once."""
    starts: list[int] = []
    for match in _JAPANESE_UNIT.finditer(text):
        if match.lastgroup == "han":
            starts += [match.start()] * MORAE_PER_KANJI
        elif match.lastgroup != "kana" or match.group() not in _SMALL_KANA:
            starts.append(match.start())
    return starts


def mandarin_syllables(text: str) -> list[int]:
    """Syllables: each Chinese character, and each Latin word or number once."""
    return [match.start() for match in _MANDARIN_UNIT.finditer(text)]


def japanese_word_break(text: str, i: int) -> bool:
    """Where a Japanese text may be cut without splitting a word: at a space, or where kana gives way to
    kanji, katakana or a Latin word ("今日は|天気が|いい"), the end of a particle or inflection — a kanji
    compound cut in two would be read differently (東京|都)."""
    before, after = text[i - 1], text[i]
    if after.isspace() or before.isspace():
        return after.isspace() and not before.isspace()
    return _HIRAGANA.match(before) is not None and _HIRAGANA.match(after) is None


def hindi_words(text: str) -> list[int]:
    """Words, with the vowel signs inside them (नमस्ते is one word, not four)."""
    return [match.start() for match in _HINDI_WORD.finditer(text)]
