"""What segmenting and normalizing need to know about a language, in one object per language.

The segmenter's policy is the same in every language (docs/text.md); what differs is measured here: the
units the first-clause rule counts, how much speech a character is, the abbreviations that do not end a
sentence, and the normalizer's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koe.text.digits import ENGLISH_DIGITS, DigitReading
from koe.text.normalize import Normalized, Rules, normalize
from koe.text.spoken import RULES


@dataclass(frozen=True, slots=True)
class Abbreviations:
    """Words that a period after does not end a sentence after (lower case, without the period).

    Attributes:
        never: precede a name or an example ("Dr.", "Sra.").
        maybe: end a sentence only before a capital ("etc.").
    """

    never: frozenset[str]
    maybe: frozenset[str]


@dataclass(frozen=True, slots=True)
class TextRules:
    """One language's text rules.

    Attributes:
        lang: koe's language code.
        rules: the normalizer's rules (markup everywhere; numbers, times, dates per language).
        unit_starts: where each unit the first-clause rule counts starts in a text (a unit several times
            over when it weighs more); None: words.
        units_per_word: units that weigh as one English word (the first clause needs
            ``first_min_words`` × this many).
        chars_per_char: English characters of speech one character of this language is (segment lengths,
            the cost model and the limits are measured in English characters).
        abbreviations: the language's abbreviations; None: English ones.
        inverted_marks: ``¿`` and ``¡`` open a question or exclamation that no clause cut may split.
        word_break: whether a segment too long for its limit may be cut before ``text[i]`` (never inside
            a word); None: at spaces and next to any CJK character.
        digits: how a number too long to be a quantity is given to the G2P (:mod:`koe.text.digits`).
    """

    lang: str
    rules: Rules = RULES
    unit_starts: Callable[[str], list[int]] | None = None
    units_per_word: float = 1.0
    chars_per_char: float = 1.0
    abbreviations: Abbreviations | None = None
    inverted_marks: bool = False
    word_break: Callable[[str, int], bool] | None = None
    digits: DigitReading = ENGLISH_DIGITS

    def normalize(self, text: str) -> Normalized:
        """``text`` as this language's G2P should read it (:func:`koe.text.normalize.normalize`)."""
        return normalize(text, self.rules, self.digits)

    def first_min_units(self, first_min_words: int) -> int:
        """Units a first clause needs in this language for ``first_min_words`` English words."""
        return max(1, round(first_min_words * self.units_per_word))


ENGLISH = TextRules("en-us")
