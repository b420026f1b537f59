"""Lexicons: words said with the phonemes someone wrote, before G2P — the server's (``KOE_LEXICON``), and a
caller's own (a session's ``lexicon`` setting, or a request's), which is consulted first.

A brand, a name or an acronym that G2P gets wrong is fixed once for every request: the file maps words to
phonemes in Kokoro's alphabet, per language (docs/pronunciation.md, "Lexicon"). A word of the text a G2P
would read that the lexicon holds (case ignored, a possessive "'s" added by its sound) becomes a phoneme
run, as if the caller had written ``[word](/phonemes/)``; a caller's own markup still wins. The file is
read once, when the model is loaded, and checked whole: a bad file stops the server there, saying why. A
caller's is checked the same way when it arrives (:func:`caller_lexicon`), bounded by
:data:`MAX_CALLER_ENTRIES`, and refused as ``invalid_field`` naming what is wrong.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koe.errors import ConfigError
from koe.g2p.symbols import unknown_symbols
from koe.languages import CODES
from koe.text.markup import MAX_PHONEME_CHARS, MAX_WORD_CHARS, PhonemeRun, Run, TextRun

#: The largest lexicon file read, and the most entries it may hold (all languages together).
MAX_LEXICON_BYTES = 2**20
MAX_ENTRIES = 10_000
#: The most entries of a caller's lexicon (a session's or a request's; its size is bounded by the message's).
MAX_CALLER_ENTRIES = 500
#: Callers' lexicons kept checked: a session's is looked up again for every turn.
_CHECKED_KEPT = 64
#: Entries under this key hold in every language.
EVERY_LANGUAGE = "*"
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_POSSESSIVE = re.compile(r"(.+)['’]s", re.I)
#: A possessive "'s" is said "ɪz" after a hissing sound, "s" after another voiceless one, else "z".
_SIBILANTS = frozenset("szʃʒʧʤ")
_VOICELESS = frozenset("ptkfθ")


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Words (lower case) → phonemes, per language code and :data:`EVERY_LANGUAGE`; ``digest`` names
    the contents (part of what decides a segment's audio: :attr:`koe.pipeline.speech.Speech.identity`)."""

    words: Mapping[str, Mapping[str, str]]
    digest: str

    def phonemes(self, word: str, lang: str) -> str | None:
        """``word``'s phonemes in ``lang`` (any case; ``X's`` as ``X`` and its possessive), or None."""
        found = self._entry(word, lang)
        if found is not None:
            return found
        possessive = _POSSESSIVE.fullmatch(word)
        if possessive is None:
            return None
        base = self._entry(possessive.group(1), lang)
        if base is None:
            return None
        last = base.rstrip("ˈˌː ")[-1:]
        return base + ("ɪz" if last in _SIBILANTS else "s" if last in _VOICELESS else "z")

    def _entry(self, word: str, lang: str) -> str | None:
        key = word.lower()
        own = self.words.get(lang, {})
        return own.get(key) if key in own else self.words.get(EVERY_LANGUAGE, {}).get(key)

    def applied(self, text: str, runs: list[Run], lang: str) -> list[Run]:
        """``runs`` of ``text`` with each word of a text run that this lexicon holds as a phoneme run."""
        out: list[Run] = []
        for run in runs:
            if not isinstance(run, TextRun):
                out.append(run)
                continue
            position = run.start
            for match in _WORD.finditer(text, run.start, run.end):
                phonemes = self.phonemes(match.group(), lang)
                if phonemes is None:
                    continue
                if match.start() > position:
                    out.append(TextRun(position, match.start()))
                out.append(PhonemeRun(match.start(), match.end(), phonemes))
                position = match.end()
            if position < run.end:
                out.append(TextRun(position, run.end))
        return out


def load_lexicon(path: Path) -> Lexicon:
    """The lexicon file at ``path``: a JSON object of language code (or ``"*"``) → object of word →
    phonemes.

    Raises:
        ConfigError: the file cannot be read, is over :data:`MAX_LEXICON_BYTES` or :data:`MAX_ENTRIES`,
            or holds a language, word or phonemes it should not (the message names which).
    """
    where = f"KOE_LEXICON {path}"
    try:
        size = path.stat().st_size
        if size > MAX_LEXICON_BYTES:
            raise ConfigError(f"{where} has {size} bytes; at most {MAX_LEXICON_BYTES}", code="invalid_field")
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where} cannot be read as JSON: {exc}", code="invalid_field") from exc
    return _checked(data, where, MAX_ENTRIES, hashlib.sha256(raw).hexdigest())


def caller_lexicon(data: Mapping[str, Any]) -> Lexicon:
    """A caller's lexicon, as the file's JSON (language code or ``"*"`` → word → phonemes), checked as the
    file is and bounded by :data:`MAX_CALLER_ENTRIES`.

    Raises:
        ConfigError: ``invalid_field``, naming the entry that is wrong.
    """
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return _caller_lexicon(canonical)


@functools.lru_cache(maxsize=_CHECKED_KEPT)
def _caller_lexicon(canonical: str) -> Lexicon:
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return _checked(json.loads(canonical), "lexicon", MAX_CALLER_ENTRIES, digest)


def _checked(data: object, where: str, max_entries: int, digest: str) -> Lexicon:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a JSON object of language → words", code="invalid_field")
    words: dict[str, dict[str, str]] = {}
    count = 0
    for lang, entries in data.items():
        if lang != EVERY_LANGUAGE and lang not in CODES:
            raise ConfigError(
                f"{where}: expected a language code ({', '.join(CODES)}) or {EVERY_LANGUAGE!r}, "
                f"got {reprlib.repr(lang)}",
                code="invalid_field",
            )
        if not isinstance(entries, dict):
            raise ConfigError(
                f"{where}: {reprlib.repr(lang)} must map to an object of words", code="invalid_field"
            )
        count += len(entries)
        if count > max_entries:
            raise ConfigError(f"{where} holds more than {max_entries} entries", code="invalid_field")
        words[lang] = {_word(where, word): _phonemes(where, word, ph) for word, ph in entries.items()}
    return Lexicon(words, digest)


def _word(where: str, word: str) -> str:
    if not _WORD.fullmatch(word) or len(word) > MAX_WORD_CHARS:
        raise ConfigError(
            f"{where}: expected one word of at most {MAX_WORD_CHARS} characters, got {reprlib.repr(word)}",
            code="invalid_field",
        )
    return word.lower()


def _phonemes(where: str, word: str, phonemes: object) -> str:
    if not isinstance(phonemes, str) or not phonemes.strip() or len(phonemes) > MAX_PHONEME_CHARS:
        raise ConfigError(
            f"{where}: {word!r} must map to phonemes of 1 to {MAX_PHONEME_CHARS} characters",
            code="invalid_field",
        )
    unknown = unknown_symbols(phonemes)
    if unknown:
        raise ConfigError(
            f"{where}: {word!r} has phonemes outside Kokoro's alphabet: "
            + ", ".join(f"{symbol!r} (U+{ord(symbol):04X})" for symbol in unknown),
            code="invalid_field",
        )
    return " ".join(phonemes.split())
