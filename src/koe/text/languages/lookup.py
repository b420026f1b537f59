"""A language's text rules and segmenter, by koe's language code."""

from __future__ import annotations

from dataclasses import replace

from koe.languages import CODES, language
from koe.text.languages.asian import (
    HINDI,
    HINDI_DIGITS,
    JAPANESE,
    JAPANESE_DIGITS,
    MANDARIN,
    MANDARIN_DIGITS,
)
from koe.text.languages.base import ENGLISH, Abbreviations, TextRules
from koe.text.languages.europe import EUROPEAN
from koe.text.languages.units import hindi_words, japanese_morae, japanese_word_break, mandarin_syllables
from koe.text.segment import Segmenter, SegmenterOptions

_NONE = Abbreviations(frozenset(), frozenset())
#: English characters of speech per character: seconds of audio per character of the language over the same
#: for American English, Kokoro at speed 1 (docs/benchmarks/language_rates.json: ja 3.20, zh 4.65, hi 1.40;
#: the others within 16% of English, so left at 1).
CHARS_PER_CHAR = {"ja": 3.2, "zh": 4.6, "hi": 1.4}

_RULES: dict[str, TextRules] = {
    "en-us": ENGLISH,
    "en-gb": replace(ENGLISH, lang="en-gb"),
    **EUROPEAN,
    "hi": TextRules(
        "hi",
        rules=HINDI,
        unit_starts=hindi_words,
        chars_per_char=CHARS_PER_CHAR["hi"],
        abbreviations=_NONE,
        digits=HINDI_DIGITS,
    ),
    "ja": TextRules(
        "ja",
        rules=JAPANESE,
        unit_starts=japanese_morae,
        word_break=japanese_word_break,
        units_per_word=5 / 3,
        chars_per_char=CHARS_PER_CHAR["ja"],
        abbreviations=_NONE,
        digits=JAPANESE_DIGITS,
    ),
    "zh": TextRules(
        "zh",
        rules=MANDARIN,
        unit_starts=mandarin_syllables,
        units_per_word=4 / 3,
        chars_per_char=CHARS_PER_CHAR["zh"],
        abbreviations=_NONE,
        digits=MANDARIN_DIGITS,
    ),
}
assert set(_RULES) == set(CODES), "every language has its text rules"


def rules_for(lang: str) -> TextRules:
    """The text rules of ``lang`` (any spelling :func:`koe.languages.language` accepts)."""
    return _RULES[language(lang).code]


def segmenter_for(lang: str, options: SegmenterOptions | None = None) -> Segmenter:
    """A segmenter for text in ``lang``: its lengths scaled so a segment holds as much speech as in
    English (a Japanese character is about two English characters of speech)."""
    rules = rules_for(lang)
    options = options or SegmenterOptions()
    if rules.chars_per_char != 1.0:
        options = scaled(options, rules.chars_per_char)
    return Segmenter(options, rules)


def scaled(options: SegmenterOptions, chars_per_char: float) -> SegmenterOptions:
    """``options`` with every length divided by ``chars_per_char`` (at least one character each)."""

    def shrink(chars: int) -> int:
        return max(1, round(chars / chars_per_char))

    return replace(
        options,
        merge_below_chars=shrink(options.merge_below_chars),
        target_chars=shrink(options.target_chars),
        max_chars=shrink(options.max_chars),
    )
