"""The languages Kokoro-82M speaks: koe's codes for them, their names, and which voices speak each.

A voice's first letter is its language, as in Kokoro (``jf_alpha`` speaks Japanese); the second is its
gender. Every layer names languages with these codes, so this table is the only place they are listed.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

from koe.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Language:
    """One language (or accent) Kokoro speaks.

    Attributes:
        code: koe's code, used on every transport (``lang``).
        name: the English name, for listings and error messages.
        native: the name in the language itself (what an agent's system prompt asks for).
        prefix: the first letter of its voices' names.
        family: languages of one family share G2P-independent rules and may be blended together
            (American and British English).
    """

    code: str
    name: str
    native: str
    prefix: str
    family: str


LANGUAGES: tuple[Language, ...] = (
    Language("en-us", "American English", "English", "a", "en"),
    Language("en-gb", "British English", "English", "b", "en"),
    Language("es", "Spanish", "español", "e", "es"),
    Language("fr", "French", "français", "f", "fr"),
    Language("hi", "Hindi", "हिन्दी", "h", "hi"),
    Language("it", "Italian", "italiano", "i", "it"),
    Language("ja", "Japanese", "日本語", "j", "ja"),
    Language("pt-br", "Brazilian Portuguese", "português do Brasil", "p", "pt"),
    Language("zh", "Mandarin Chinese", "中文", "z", "zh"),
)
CODES = tuple(language.code for language in LANGUAGES)
DEFAULT = LANGUAGES[0]
_BY_CODE = {language.code: language for language in LANGUAGES}
_BY_PREFIX = {language.prefix: language for language in LANGUAGES}
#: Other spellings clients send (BCP 47 regions, ISO 639-3, Kokoro's one-letter codes), folded to ours.
_ALIASES = {
    "en": "en-us",
    "en-uk": "en-gb",
    "es-es": "es",
    "fr-fr": "fr",
    "hi-in": "hi",
    "it-it": "it",
    "ja-jp": "ja",
    "jp": "ja",
    "pt": "pt-br",
    "zh-cn": "zh",
    "cmn": "zh",
    **{language.prefix: language.code for language in LANGUAGES},
}


def language(code: object) -> Language:
    """The language a client's ``lang`` names (any case, ``_`` or ``-``, the aliases above).

    Raises:
        ConfigError: not a language Kokoro speaks; the message lists koe's codes.
    """
    if not isinstance(code, str):
        raise ConfigError(f"lang must be a string, one of {', '.join(CODES)}; got {reprlib.repr(code)}")
    folded = code.strip().lower().replace("_", "-")
    found = _BY_CODE.get(_ALIASES.get(folded, folded))
    if found is None:
        raise ConfigError(f"lang must be one of {', '.join(CODES)}, got {reprlib.repr(code)}")
    return found


def of_voice(name: str) -> Language | None:
    """The language a voice name speaks by its first letter; None for a name of no Kokoro language."""
    return _BY_PREFIX.get(name[:1])
