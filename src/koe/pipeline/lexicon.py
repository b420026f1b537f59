"""Lexicons: words said the way someone wrote, before G2P — the server's (``KOE_LEXICON``), and a caller's own
(a session's ``lexicon`` setting, or a request's), which is consulted first.

A brand, a name or an acronym that G2P gets wrong is fixed once for every request: the file maps words,
per language, to phonemes in Kokoro's alphabet or to a respelling the language's G2P reads instead
(docs/pronunciation.md, "Lexicon"). A word of the text a G2P would read that the lexicon holds (case
ignored, a possessive "'s" added by its sound) becomes a phoneme run, as if the caller had written
``[word](/phonemes/)``, so its timing points at the word as written; a caller's own markup still wins. The
file (JSON, or TSV when its name ends in ``.tsv``) is read once, when the model is loaded, and checked whole:
a bad file stops the server there, saying why (a TSV file's message names the line). A caller's, in the
JSON shape, is checked the same way when it arrives (:func:`caller_lexicon`), bounded by
:data:`MAX_CALLER_ENTRIES`, and refused as ``invalid_field`` naming what is wrong.

A respelling is written with a leading ``=`` (``"Nguyen": "=win"``), a value without one is phonemes.
Phonemes stay bare because every lexicon written before respellings holds bare phonemes, and ``=`` is no
symbol of Kokoro's vocabulary, so no phoneme string starts with it; the one string form serves the JSON
file, the TSV file and a caller's lexicon alike (a caller's travels as an object of strings). A respelling
is letters, words joined by single spaces, hyphens or apostrophes, no longer than a word may be: no digits
(the G2P reads it without the normalizer) and no markup. A hyphen is read as a space (``ko-eh`` as
``ko eh``): English G2P reads it as a dash, which the model says as a break inside the word.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import reprlib
from collections.abc import Callable, Mapping
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
#: What starts a respelling (see the module's docstring).
RESPELLING_MARK = "="
#: A TSV file's line: language, word, phonemes or respelling.
_TSV_FIELDS = 3
#: A file whose name ends so is TSV; any other is JSON.
TSV_SUFFIX = ".tsv"
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_RESPELLING = re.compile(r"[^\W\d_]+(?:[ '’-][^\W\d_]+)*")
_POSSESSIVE = re.compile(r"(.+)['’]s", re.I)
#: A possessive "'s" is said "ɪz" after a hissing sound, "s" after another voiceless one, else "z".
_SIBILANTS = frozenset("szʃʒʧʤ")
_VOICELESS = frozenset("ptkfθ")

#: How a language's G2P reads a respelling: its phonemes.
Reader = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Respelling:
    """Text the language's G2P reads in place of a word (``"Nguyen"`` read as ``"win"``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Lexicon:
    """Words (lower case) → phonemes or a :class:`Respelling`, per language code and
    :data:`EVERY_LANGUAGE`; ``digest`` names the contents (part of what decides a segment's audio:
    :attr:`koe.pipeline.speech.Speech.identity`)."""

    words: Mapping[str, Mapping[str, str | Respelling]]
    digest: str

    def phonemes(self, word: str, lang: str, read: Reader) -> str | None:
        """``word``'s phonemes in ``lang`` (any case; ``X's`` as ``X`` and its possessive), a respelling's
        as ``read`` gives them; None when the lexicon lacks the word."""
        found = self._said(word, lang)
        return read(found.text) if isinstance(found, Respelling) else found

    def _said(self, word: str, lang: str) -> str | Respelling | None:
        found = self._entry(word, lang)
        if found is not None:
            return found
        possessive = _POSSESSIVE.fullmatch(word)
        if possessive is None:
            return None
        base = self._entry(possessive.group(1), lang)
        if isinstance(base, Respelling):
            return Respelling(base.text + "'s")  # the G2P says the possessive of what it reads
        if base is None:
            return None
        last = base.rstrip("ˈˌː ")[-1:]
        return base + ("ɪz" if last in _SIBILANTS else "s" if last in _VOICELESS else "z")

    def _entry(self, word: str, lang: str) -> str | Respelling | None:
        key = word.lower()
        own = self.words.get(lang, {})
        return own.get(key) if key in own else self.words.get(EVERY_LANGUAGE, {}).get(key)

    def applied(self, text: str, runs: list[Run], lang: str, read: Reader) -> list[Run]:
        """``runs`` of ``text`` with each word of a text run that this lexicon holds as a phoneme run
        spanning the word as written (a respelling's phonemes as ``read``, the language's G2P, gives
        them)."""
        out: list[Run] = []
        for run in runs:
            if not isinstance(run, TextRun):
                out.append(run)
                continue
            position = run.start
            for match in _WORD.finditer(text, run.start, run.end):
                phonemes = self.phonemes(match.group(), lang, read)
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
    """The lexicon file at ``path``: TSV when its name ends in :data:`TSV_SUFFIX` (:func:`_tsv_entries`),
    else a JSON object of language code (or ``"*"``) → object of word → phonemes or ``=respelling``.

    Raises:
        ConfigError: the file cannot be read, is over :data:`MAX_LEXICON_BYTES` or :data:`MAX_ENTRIES`,
            or holds a language, word, phonemes or respelling it should not (the message names which, and
            in a TSV file the line).
    """
    where = f"KOE_LEXICON {path}"
    tsv = path.suffix.lower() == TSV_SUFFIX
    try:
        size = path.stat().st_size
        if size > MAX_LEXICON_BYTES:
            raise ConfigError(f"{where} has {size} bytes; at most {MAX_LEXICON_BYTES}", code="invalid_field")
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
        data = None if tsv else json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{where} cannot be read as {'UTF-8 text' if tsv else 'JSON'}: {exc}", code="invalid_field"
        ) from exc
    digest = hashlib.sha256(raw).hexdigest()
    if tsv:
        return Lexicon(_tsv_entries(text, where), digest)
    return _checked(data, where, MAX_ENTRIES, digest)


def caller_lexicon(data: Mapping[str, Any]) -> Lexicon:
    """A caller's lexicon, as the file's JSON (language code or ``"*"`` → word → phonemes or
    ``=respelling``), checked as the file is and bounded by :data:`MAX_CALLER_ENTRIES`.

    Raises:
        ConfigError: ``invalid_field``, naming the entry that is wrong.
    """
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return _caller_lexicon(canonical)


@functools.lru_cache(maxsize=_CHECKED_KEPT)
def _caller_lexicon(canonical: str) -> Lexicon:
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return _checked(json.loads(canonical), "lexicon", MAX_CALLER_ENTRIES, digest)


def _tsv_entries(text: str, where: str) -> dict[str, dict[str, str | Respelling]]:
    """A TSV lexicon's entries: one a line, ``language<TAB>word<TAB>value`` (value: phonemes, or ``=`` and
    a respelling), ``*`` as the language for every language; blank lines and lines starting with ``#``
    are skipped. Split at tabs only, no quoting (a ``"`` is a character like any other), each field's
    surrounding spaces dropped. A word twice in one language is refused, naming both lines."""
    words: dict[str, dict[str, str | Respelling]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, line in enumerate(text.split("\n"), start=1):  # as an editor numbers them
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        at = f"{where} line {number}"
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != _TSV_FIELDS:
            raise ConfigError(
                f"{at}: expected {_TSV_FIELDS} tab-separated fields (language, word, phonemes or "
                f"=respelling), got {len(fields)}: {reprlib.repr(line)}",
                code="invalid_field",
            )
        lang, word, value = fields
        key = (_lang(at, lang), _word(at, word))
        if key in first_line:
            raise ConfigError(
                f"{at}: {word!r} in {lang!r} is on line {first_line[key]} already", code="invalid_field"
            )
        if len(first_line) == MAX_ENTRIES:
            raise ConfigError(f"{where} holds more than {MAX_ENTRIES} entries", code="invalid_field")
        first_line[key] = number
        words.setdefault(lang, {})[key[1]] = _value(at, word, value)
    return words


def _checked(data: object, where: str, max_entries: int, digest: str) -> Lexicon:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a JSON object of language → words", code="invalid_field")
    words: dict[str, dict[str, str | Respelling]] = {}
    count = 0
    for lang, entries in data.items():
        _lang(where, lang)
        if not isinstance(entries, dict):
            raise ConfigError(
                f"{where}: {reprlib.repr(lang)} must map to an object of words", code="invalid_field"
            )
        count += len(entries)
        if count > max_entries:
            raise ConfigError(f"{where} holds more than {max_entries} entries", code="invalid_field")
        words[lang] = {_word(where, word): _value(where, word, value) for word, value in entries.items()}
    return Lexicon(words, digest)


def _lang(where: str, lang: str) -> str:
    if lang != EVERY_LANGUAGE and lang not in CODES:
        raise ConfigError(
            f"{where}: expected a language code ({', '.join(CODES)}) or {EVERY_LANGUAGE!r}, "
            f"got {reprlib.repr(lang)}",
            code="invalid_field",
        )
    return lang


def _word(where: str, word: str) -> str:
    if not _WORD.fullmatch(word) or len(word) > MAX_WORD_CHARS:
        raise ConfigError(
            f"{where}: expected one word of at most {MAX_WORD_CHARS} characters, got {reprlib.repr(word)}",
            code="invalid_field",
        )
    return word.lower()


def _value(where: str, word: str, value: object) -> str | Respelling:
    """An entry's phonemes, or its respelling when it starts with :data:`RESPELLING_MARK`."""
    if isinstance(value, str) and value.startswith(RESPELLING_MARK):
        return _respelling(where, word, value.removeprefix(RESPELLING_MARK))
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PHONEME_CHARS:
        raise ConfigError(
            f"{where}: {word!r} must map to phonemes of 1 to {MAX_PHONEME_CHARS} characters, or to "
            f"{RESPELLING_MARK!r} and a respelling",
            code="invalid_field",
        )
    unknown = unknown_symbols(value)
    if unknown:
        raise ConfigError(
            f"{where}: {word!r} has phonemes outside Kokoro's alphabet: "
            + ", ".join(f"{symbol!r} (U+{ord(symbol):04X})" for symbol in unknown),
            code="invalid_field",
        )
    return " ".join(value.split())


def _respelling(where: str, word: str, text: str) -> Respelling:
    spelled = " ".join(text.split())
    if not _RESPELLING.fullmatch(spelled) or len(spelled) > MAX_WORD_CHARS:
        raise ConfigError(
            f"{where}: {word!r} must be respelled as letters (words joined by spaces, hyphens or "
            f"apostrophes) of at most {MAX_WORD_CHARS} characters, got {reprlib.repr(text)}",
            code="invalid_field",
        )
    return Respelling(spelled.replace("-", " "))  # syllables said together: a G2P reads a hyphen as a dash
