"""Whether a transcript says what a listener should hear: compared after Whisper's English normalization.

Both sides go through the same steps, so only what was *said* counts, not how the ASR chose to write it:

1. written forms the ASR uses for spoken ones are said out: "example.com" is "example dot com",
   "bob@x.org" is "bob at x dot org", "World War II" is "World War 2" and "Elizabeth II" "Elizabeth the
   2nd", "9-5" is "9 to 5" (but "24-7" is "24 7"), "Ctrl" is "control", "30 cm" is
   "30 centimeters" (lower case only: "CM" is what the ASR writes for the letters), a sign before a
   number is a word ("-2%" is "minus 2%"), and separators between digits go ("9:30", "555-1234" and
   "+1 555 123 4567" are the digits said, and so are "1,000" and "1000");
2. Whisper's ``EnglishTextNormalizer`` (whisper-normalizer): spelled numbers become digits, "$5.99" and
   "five dollars and ninety-nine cents" meet, "Dr." is "doctor", punctuation goes;
3. "minus 2" and "plus 2" become "-2" and "+2" (the normalizer does this only for spelled numbers);
4. ordinal suffixes go ("January 15" and "January fifteenth" are the same speech; the ASR writes either)
   and so do periods (the normalizer leaves a trailing "..." and the dot of "5.99");
5. words that sound the same are the same word: "too" is "to", "sight" is "site", "chords" "cords"...
   and a lone "one" is "1", which the normalizer keeps a word (:data:`HOMOPHONES`; no listener can tell
   them apart either), and so are pairs of words whose boundary falls elsewhere in the same sounds: "dots
   leap" is "dot sleep" (:data:`JUNCTURES`);
6. all spaces go: "F B I" and "FBI", "8 30" and "830", "rain forest" and "rainforest" are the same sounds.

A text passes when the two results are identical: one word heard differently fails it.  What this cannot
tell apart: how digits were grouped ("five five five" and "five hundred fifty-five" both give 555), and a
decimal point ("2.5" and "25").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from koe.text.lexicon import REGNAL_NAMES, ROMAN
from koe.text.numbers import ordinal

#: Upper-case Roman numerals 2-20 standing alone, those of one letter left out ("I", "V", "X" are more
#: often a pronoun or a spelled letter); after a monarch's name the ASR writes "Elizabeth II" for
#: "Elizabeth the Second".
_ROMAN = {numeral: value for numeral, value in ROMAN.items() if len(numeral) > 1}
_ROMAN_WORD = re.compile(r"\b(?:([A-Z][a-z]+) )?(" + "|".join(sorted(_ROMAN, key=len, reverse=True)) + r")\b")
#: "9-5", "20-25": the ASR writes a short range with a hyphen.
_SHORT_RANGE = re.compile(r"\b(\d{1,2})[-–](\d{1,2})\b")
#: "24-7" is how the ASR writes "twenty-four seven" (24/7), which no one says as a range "24 to 7".
_ALL_DAY = re.compile(r"\b24[-/]7\b")
#: Unit abbreviations the ASR writes after a number for the spoken unit.
_UNITS = {"cm": "centimeters", "mm": "millimeters", "km": "kilometers", "kg": "kilograms"}
_UNITS |= {"mg": "milligrams", "ml": "milliliters"}
_UNIT_WORD = re.compile(r"(?<=\d) ?(" + "|".join(_UNITS) + r")\b")
_CONTROL = re.compile(r"\bCtrl\b", re.IGNORECASE)
#: A dot inside a name ("example.com", "config.yaml", "john.smith"; not "U.S."): said "dot".
_NAME_DOT = re.compile(r"(?<=[A-Za-z]{2})\.(?=[A-Za-z]{2})")
_AT = re.compile(r"(?<=\w)@(?=\w)")
#: "(555)": the normalizer drops anything in parentheses, taking it for a non-speech annotation.
_PARENTHESIZED_DIGITS = re.compile(r"\((\d+)\)")
#: Separators between digits: "9:30", "555-1234", "+1 555 123 4567", "1,000" (a decimal point waits for
#: step 4, where the normalizer has read "4.2 billion").
_DIGIT_SEPARATOR = re.compile(r"(?<=\d)[-:,\s]+(?=\d)")
_SIGN = re.compile(r"(?<![\w.])([-+])(?=\d)")
_SIGN_WORD = re.compile(r"\b(minus|plus) (?=\d)")
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b")
_NUMBER_SEPARATOR = re.compile(r"(?<=\d)\s+(?=\d)")
#: Words that sound alike, each → the one it is scored as (the normalizer turns "two" into "2" already).
HOMOPHONES = {"too": "to", "sight": "site", "sights": "sites", "chord": "cord", "chords": "cords"}
HOMOPHONES |= {"pair": "pear", "pairs": "pears", "buy": "by", "bye": "by"}
#: The normalizer keeps a lone "one" a word (it may be a pronoun): "plus one, 555…" missed "+1 555…".
HOMOPHONES["one"] = "1"
_HOMOPHONE = re.compile(r"\b(" + "|".join(HOMOPHONES) + r")\b")
#: Word pairs that are the same sounds split elsewhere, each → the one it is scored as (an ASR writes
#: either; "time.sleep()" read aloud was heard as "time dots, leap" on one CPU's audio, 2026-12-02).
JUNCTURES = {"dots leap": "dot sleep"}
_JUNCTURE = re.compile(r"\b(" + "|".join(JUNCTURES) + r")\b")
_SPACE = re.compile(r"\s+")


@cache
def _whisper_normalizer() -> Callable[[str], str]:
    from whisper_normalizer.english import EnglishTextNormalizer

    normalizer: Callable[[str], str] = EnglishTextNormalizer()
    return normalizer


def _numeral(m: re.Match[str]) -> str:
    name, value = m.group(1), _ROMAN[m.group(2)]
    if name is None:
        return str(value)
    return f"{name} the {ordinal(value)}" if name in REGNAL_NAMES else f"{name} {value}"


def _spoken_forms(text: str) -> str:
    """Step 1 of the module docstring."""
    text = _SHORT_RANGE.sub(r"\1 to \2", _ALL_DAY.sub("24 7", text))
    text = _ROMAN_WORD.sub(_numeral, text)
    text = _UNIT_WORD.sub(lambda m: " " + _UNITS[m.group(1)], text)
    text = _AT.sub(" at ", _NAME_DOT.sub(" dot ", _CONTROL.sub("control", text)))
    text = _DIGIT_SEPARATOR.sub("", _PARENTHESIZED_DIGITS.sub(r" \1 ", text))
    return _SIGN.sub(lambda m: " minus " if m.group(1) == "-" else " plus ", text)


def canonical(text: str) -> str:
    """``text`` reduced to what is said (see the module docstring): lower case, no spaces."""
    text = _whisper_normalizer()(_spoken_forms(text))
    text = _SIGN_WORD.sub(lambda m: "-" if m.group(1) == "minus" else "+", text)
    text = _NUMBER_SEPARATOR.sub("", _ORDINAL.sub("", text)).replace(".", "")
    text = _HOMOPHONE.sub(lambda m: HOMOPHONES[m.group()], text)
    text = _JUNCTURE.sub(lambda m: JUNCTURES[m.group()], _SPACE.sub(" ", text))
    return _SPACE.sub("", text)


def heard_as_expected(transcript: str, expected: str) -> bool:
    """Whether ``transcript`` says the same as ``expected`` once both are reduced by :func:`canonical`."""
    return canonical(transcript) == canonical(expected)
