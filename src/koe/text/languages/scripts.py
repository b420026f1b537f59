"""Which writing systems each language's G2P reads, and a clear error for text in another one.

A G2P given a script it cannot read says nothing, or worse, something: espeak-ng reads kanji as "Chinese
letter", misaki's English leaves them out, misaki's Mandarin passes kana through as garbage. So a segment
in a script its language does not read fails with a message that names the script and the language that
reads it. Latin letters are read in every language (Japanese and Mandarin through the English G2P).
"""

from __future__ import annotations

import re

from koe.errors import ConfigError
from koe.languages import language

#: Scripts whose words some language here cannot read: name → character class.
_SCRIPTS = {
    "Japanese kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "Chinese characters (kanji/hanzi)": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "Devanagari": "\u0900-\u097f",
    "Korean hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "Cyrillic": "\u0400-\u04ff",
    "Arabic": "\u0600-\u06ff",
    "Hebrew": "\u0590-\u05ff",
    "Thai": "\u0e00-\u0e7f",
}
_READS = {
    "ja": ("Japanese kana", "Chinese characters (kanji/hanzi)"),
    "zh": ("Chinese characters (kanji/hanzi)",),
    "hi": ("Devanagari",),
}
#: Which language reads each script, for the error message.
_READER = {"Japanese kana": "ja", "Chinese characters (kanji/hanzi)": "zh or ja", "Devanagari": "hi"}
_FOREIGN = {
    lang: re.compile("|".join(f"(?P<s{n}>[{chars}]+)" for n, (name, chars) in enumerate(_SCRIPTS.items())
                              if name not in _READS.get(lang, ())))
    for lang in ("en-us", "en-gb", "es", "fr", "hi", "it", "ja", "pt-br", "zh")
}  # fmt: skip
_NAMES = list(_SCRIPTS)
_SAMPLE_CHARS = 12


def foreign_script(text: str, lang: str) -> tuple[str, str] | None:
    """The first script in ``text`` that ``lang`` does not read, and a sample of it; None if it reads all."""
    match = _FOREIGN[lang].search(text)
    if match is None or match.lastgroup is None:
        return None
    return _NAMES[int(match.lastgroup[1:])], match.group()[:_SAMPLE_CHARS]


def check_script(text: str, lang: str) -> None:
    """Raise ``ConfigError`` (``unsupported_script``) when ``text`` holds a script ``lang`` cannot read."""
    found = foreign_script(text, lang)
    if found is None:
        return
    script, sample = found
    reader = _READER.get(script)
    hint = f"use a voice of lang {reader} (or set lang) for it" if reader else "no Kokoro language reads it"
    raise ConfigError(
        f"the text has {script} ({sample!r}), which lang {lang} ({language(lang).name}) cannot read; {hint}",
        code="unsupported_script",
    )
