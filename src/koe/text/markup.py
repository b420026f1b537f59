"""Inline pronunciation markup: ``[word](/phonemes/)`` and ``[pause:0.5s]``, its grammar in one place.

A caller who hears a word mispronounced writes the phonemes it should get, in Kokoro's alphabet, and a pause
of the length it wants; neither is ever read aloud (docs/pronunciation.md). The grammar is used three times,
so it lives here: the boundary scanner never cuts inside an element, and waits at a ``[`` until the text
after it says whether it opens one (:func:`element_end`); the normalizer keeps an element as written, so the
spoken text (and with it the segment cache's key) carries the phonemes (:data:`MARKUP_RULE`); and the
pipeline splits a segment's spoken text into text to read, phonemes to use and silences (:func:`runs`).

Every part of an element has a bounded length, so waiting for one to close costs a bounded look-ahead, and
a pause is bounded by :data:`MAX_PAUSE_S`. Pure: no vocabulary here (the pipeline checks the phoneme
symbols against the model's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from koe.errors import ConfigError
from koe.text.say import Rule, Say

#: The error code of markup that cannot be honoured; the message names what is wrong.
INVALID_MARKUP = "invalid_markup"
#: The longest pause one element asks for; a longer one is refused rather than cut short.
MAX_PAUSE_S = 10.0
#: The longest word of a phoneme element, and its longest phoneme string (a name, not a sentence).
MAX_WORD_CHARS = 50
MAX_PHONEME_CHARS = 150
#: The longest thing between ``[pause:`` and ``]`` that is read as a pause's length.
_MAX_PAUSE_CHARS = 40

_WORD = rf"[^\[\]\n]{{1,{MAX_WORD_CHARS}}}"
_PHONEMES = rf"[^/\n]{{1,{MAX_PHONEME_CHARS}}}"
_PAUSE_LENGTH_CHARS = rf"[^\[\]\n]{{0,{_MAX_PAUSE_CHARS}}}"
_PAUSE = rf"\[pause:(?P<length>{_PAUSE_LENGTH_CHARS})\]"
_PHONEME_ELEMENT = rf"\[(?P<word>{_WORD})\]\(/(?P<phonemes>{_PHONEMES})/\)"
#: The same, without group names (the normalizer's alternation names each rule's groups itself).
_BARE_ELEMENT = rf"\[pause:{_PAUSE_LENGTH_CHARS}\]|\[{_WORD}\]\(/{_PHONEMES}/\)"
#: An element the text ended in before it closed (at a flush): an error, never read as a half tag.
_OPEN = rf"\[pause:{_PAUSE_LENGTH_CHARS}\Z|\[{_WORD}\]\(/(?:[^/\n]{{0,{MAX_PHONEME_CHARS}}}/?)?\Z"
#: A pause is checked before a phoneme element: ``[pause:…]`` is always a pause.
_ELEMENT = re.compile(f"{_PAUSE}|{_PHONEME_ELEMENT}")
_ANY = re.compile(f"{_PAUSE}|{_PHONEME_ELEMENT}|(?P<open>{_OPEN})")
#: What a ``[`` followed by the end of the text so far may still grow into an element.
_INSIDE_CHARS = max(MAX_WORD_CHARS, len("pause:") + _MAX_PAUSE_CHARS)
_PREFIX = re.compile(
    rf"\[[^\[\]\n]{{0,{_INSIDE_CHARS}}}(?:\](?:\((?:/(?:[^/\n]{{0,{MAX_PHONEME_CHARS}}}/?)?)?)?)?\Z"
)
_PAUSE_LENGTH = re.compile(r"(?P<number>\d{1,5}(?:\.\d{1,3})?)(?P<unit>ms|s)")


@dataclass(frozen=True, slots=True)
class TextRun:
    """Text to read with the language's G2P: ``[start, end)`` of the spoken text."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class PhonemeRun:
    """A word said with the caller's phonemes; ``[start, end)`` is the word in the spoken text."""

    start: int
    end: int
    phonemes: str


@dataclass(frozen=True, slots=True)
class PauseRun:
    """Silence of ``seconds``; no word, no model call."""

    seconds: float


Run = TextRun | PhonemeRun | PauseRun


def element_end(text: str, start: int, final: bool) -> int | None:
    """Where the markup element opening at ``text[start]`` (a ``[``) ends; ``start`` if none opens there;
    None while the text so far may still become one (``final``: no more text will come)."""
    match = _ELEMENT.match(text, start)
    if match is not None:
        return match.end()
    if not final and _PREFIX.match(text, start):
        return None
    return start


def spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of every complete element in ``text``, in order."""
    return [match.span() for match in _ELEMENT.finditer(text)]


def runs(text: str) -> list[Run]:
    """``text`` (a segment's spoken text) as text, phoneme and pause runs in order; no markup, one run.

    Raises:
        ConfigError: ``invalid_markup``: a pause whose length does not parse or is over
            :data:`MAX_PAUSE_S`, or an element the text ends inside.
    """
    out: list[Run] = []
    position = 0
    for match in _ANY.finditer(text):
        if match.start() > position:
            out.append(TextRun(position, match.start()))
        position = match.end()
        if match.group("open") is not None:
            raise ConfigError(
                f"expected markup to be closed ([word](/phonemes/) or [pause:500ms]), got the text ending "
                f"inside {match.group('open')!r} at character {match.start()}",
                code=INVALID_MARKUP,
            )
        if match.group("word") is not None:
            out.append(PhonemeRun(match.start("word"), match.end("word"), match.group("phonemes")))
        else:
            out.append(PauseRun(pause_seconds(match.group("length"))))
    if position < len(text):
        out.append(TextRun(position, len(text)))
    return out


def pause_seconds(length: str) -> float:
    """The seconds of a pause's length, ``"0.5s"`` or ``"500ms"``.

    Raises:
        ConfigError: ``invalid_markup``: not a length, or over :data:`MAX_PAUSE_S`.
    """
    match = _PAUSE_LENGTH.fullmatch(length.strip())
    if match is None:
        raise ConfigError(
            f"expected a pause length such as 0.5s or 500ms, got {length!r}", code=INVALID_MARKUP
        )
    seconds = float(match.group("number")) / (1000 if match.group("unit") == "ms" else 1)
    if seconds > MAX_PAUSE_S:
        raise ConfigError(
            f"expected a pause of at most {MAX_PAUSE_S:g} s, got {seconds:g} s", code=INVALID_MARKUP
        )
    return seconds


def _keep(match: re.Match[str]) -> list[Say]:
    """An element goes to the pipeline as written, each character standing for itself (its word's
    characters are what the word's timing points at)."""
    return [Say(match.group(), match.start(), match.end(), verbatim=True)]


#: The normalizer's rule for markup, first in every language's rules: complete elements, and one the
#: segment ends inside, kept as written.
MARKUP_RULE: Rule = ("pronunciation", f"{_BARE_ELEMENT}|{_OPEN}", _keep)
