"""The normalizer's rules for words: abbreviations said as their phrase, names with dots, shortcuts.

"e.g." is said "for example" (misaki spells it "E G"), "TBD" "to be determined", "config.yaml"
"config dot yaml", "Ctrl+C" "control C", "yes/no" "yes or no", "file(s)" "files"; emoticons go.
The word lists are in :mod:`koe.text.lexicon`.
"""

from __future__ import annotations

import re

from koe.text.lexicon import ACRONYM_WORDS, KEYS, PHRASES, SLASH_OR
from koe.text.numbers import alternatives
from koe.text.say import Rule, Say, at_end, erase, say

#: What may stand before the first word of a sentence.
_OPENERS = frozenset(".!?:\"“‘'(*_#>")


def _starts_sentence(m: re.Match[str]) -> bool:
    i = m.start()
    while i > 0 and m.string[i - 1].isspace():
        i -= 1
    return i == 0 or m.string[i - 1] in _OPENERS


def _phrase(m: re.Match[str]) -> list[Say]:
    words = PHRASES[m.group()]
    if m.group().isupper() and _starts_sentence(m):
        words = words[0].upper() + words[1:]  # "BTW, the store..." → "By the way, the store..."
    if m.group().endswith(".") and at_end(m):
        words += "."  # "Oak Ave." ends the segment: its period still ends the sentence
    return [Say(words, m.start(), m.end())]


def _acronym(m: re.Match[str]) -> list[Say]:
    return [Say(ACRONYM_WORDS[m.group()], m.start(), m.end())]


def _number_word(m: re.Match[str]) -> list[Say]:
    """ "No. 5" is "number 5" (misaki says "no five")."""
    return [Say(f"{m.group('no')}umber ", m.start(), m.end())]


def _slash_or(m: re.Match[str]) -> list[Say]:
    said = SLASH_OR[m.group().lower()]
    return [Say(said[0].upper() + said[1:] if m.group()[0].isupper() else said, m.start(), m.end())]


def _plural(m: re.Match[str]) -> list[Say]:
    """ "file(s)": the "s" is kept, the parentheses go."""
    return [Say("s", m.start() + 1, m.end() - 1, verbatim=True)]


def _keys(m: re.Match[str]) -> list[Say]:
    said = " ".join(KEYS.get(key, key) for key in m.group().split("+"))
    return [Say(said, m.start(), m.end())]


def _word_end(key: str) -> str:
    return r"\b" if key[-1].isalnum() else r"(?!\w)"


_PHRASES = "|".join(rf"{re.escape(k)}{_word_end(k)}" for k in sorted(PHRASES, key=len, reverse=True))
_KEY_NAMES = alternatives(KEYS)

#: ``(name, pattern, handler)`` in priority order.
WORD_RULES: tuple[Rule, ...] = (
    ("phrase", rf"(?<![\w./])(?:{_PHRASES})", _phrase),
    ("acronym", rf"\b(?:{alternatives(ACRONYM_WORDS)})\b", _acronym),
    ("number_word", r"\b(?P<no>[Nn])o\.[ \t]?(?=\d)", _number_word),
    ("slash_or", rf"(?i:\b(?:{alternatives(SLASH_OR)})\b)", _slash_or),
    ("plural", r"(?<=[a-z])\(s\)", _plural),
    ("call", r"(?<=\w)\(\)", erase),
    ("keys", rf"\b(?:{_KEY_NAMES})(?:\+(?:{_KEY_NAMES}|[A-Za-z0-9]{{1,10}}))+\b", _keys),
    #: "config.yaml", "time.sleep": a dot between names (not "e.g.", "U.S.", "3.14", "end.The")
    ("name_dot", r"(?<=\w\w)\.(?=[a-z_]\w)", say(" dot ")),
    ("emoticon", r"(?<![\w:])[:;]-?[()DP](?!\w)|(?<=\w)[:;]-?[()](?!\w)", erase),
)
