"""Speech normalizer: turns LLM-style text (markdown, URLs, emojis, symbols) into what should be said.

One left-to-right pass over the text with a single alternation of rules.  Every character of the result
remembers the source span it came from, so a word in the spoken text can be pointed back at what the LLM
wrote (captions, word timings, truncating the transcript at an interruption).  Numbers, currency,
percentages and abbreviations are left to misaki, which already reads them right; only the forms it
misreads are rewritten here (measurements in docs/text.md).  Whatever the rules made of a number, one too
long to be a quantity is then read digit by digit (:mod:`koe.text.digits`), so no input makes the G2P's
work superlinear.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from koe.errors import ConfigError
from koe.text.digits import ENGLISH_DIGITS, DigitReading, long_numbers
from koe.text.markup import spans as markup_spans
from koe.text.spoken import RULES, Say

#: Nothing is worth saying unless it contains a letter or a digit.
_SPEAKABLE = re.compile(r"[^\W_]")
_NO_SPACE_BEFORE = frozenset(".,;:!?")


@dataclass(frozen=True, slots=True)
class Alignment:
    """Per spoken character, the ``[start, end)`` source span it was made from (monotone, non-decreasing)."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The source span that the spoken text ``[start, end)`` was made from.

        Raises:
            ConfigError: the range is empty or outside the spoken text.
        """
        if not 0 <= start < end <= len(self.starts):
            raise ConfigError(
                f"expected a spoken range 0 <= start < end <= {len(self.starts)}, got [{start}, {end})"
            )
        return self.starts[start], self.ends[end - 1]

    def shifted(self, offset: int) -> Alignment:
        """The same alignment with source offsets moved by ``offset`` (segment-relative → turn-absolute)."""
        return Alignment(tuple(s + offset for s in self.starts), tuple(e + offset for e in self.ends))


@dataclass(frozen=True, slots=True)
class Normalized:
    """The spoken form of a text and where each of its characters came from."""

    spoken: str
    alignment: Alignment


class _Builder:
    """Accumulates spoken characters with their source spans, collapsing whitespace as it goes."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    def put(self, text: str, start: int, end: int, verbatim: bool) -> None:
        for k, ch in enumerate(text):
            if ch.isspace():
                if not self.chars or self.chars[-1] == " ":
                    continue  # collapse runs, drop leading space
                ch = " "
            elif ch in _NO_SPACE_BEFORE and self.chars and self.chars[-1] == " ":
                self._pop()  # "world 👋!" → "world!": removed markup leaves no space before punctuation
            if verbatim:
                self._add(ch, start + k, start + k + 1)
            else:
                self._add(ch, start, end)

    def read_long_numbers(self, reading: DigitReading) -> None:
        """Rewrite the numbers past the ceiling in what is built so far (:func:`long_numbers`), each new
        character standing for the source of the characters it replaces."""
        text = "".join(self.chars)
        said = long_numbers(text, reading)
        kept_as_written = markup_spans(text)  # a pause's length or a phoneme is read by the pipeline
        said = [p for p in said if not any(a < p.end and p.start < b for a, b in kept_as_written)]
        if not said:
            return
        chars, starts, ends = self.chars, self.starts, self.ends
        self.chars, self.starts, self.ends = [], [], []
        kept = 0  # characters before this one are copied or replaced
        for part in said:
            self._copy(chars, starts, ends, kept, part.start)
            if part.text is None:
                self._copy(chars, starts, ends, part.start, part.end)
            else:
                self.put(part.text, starts[part.start], ends[part.end - 1], verbatim=False)
            kept = part.end
        self._copy(chars, starts, ends, kept, len(chars))

    def _copy(self, chars: list[str], starts: list[int], ends: list[int], start: int, end: int) -> None:
        self.chars += chars[start:end]
        self.starts += starts[start:end]
        self.ends += ends[start:end]

    def _add(self, ch: str, start: int, end: int) -> None:
        self.chars.append(ch)
        self.starts.append(start)
        self.ends.append(end)

    def _pop(self) -> None:
        self.chars.pop()
        self.starts.pop()
        self.ends.pop()

    def result(self) -> Normalized:
        while self.chars and self.chars[-1] == " ":
            self._pop()
        spoken = "".join(self.chars)
        if not _SPEAKABLE.search(spoken):
            return Normalized("", Alignment((), ()))
        return Normalized(spoken, Alignment(tuple(self.starts), tuple(self.ends)))


Rules = tuple[tuple[str, str, Callable[[re.Match[str]], list[Say]]], ...]


@functools.cache
def _compiled(rules: Rules) -> tuple[re.Pattern[str], dict[str, Callable[[re.Match[str]], list[Say]]]]:
    """One alternation of ``rules`` and each rule's handler (a language's rules: koe.text.languages)."""
    master = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern, _ in rules), re.M)
    return master, {name: handler for name, _, handler in rules}


def normalize(text: str, rules: Rules = RULES, digits: DigitReading = ENGLISH_DIGITS) -> Normalized:
    """Rewrite ``text`` for G2P and keep, per spoken character, the source span it came from.

    Args:
        text: a segment (or any text) as the LLM wrote it.
        rules: the rules to apply (English by default; other languages': :mod:`koe.text.languages`).
        digits: how long a number the language reads as a number, and how it reads a longer one.

    Returns:
        ``spoken`` ("" when nothing in it can be said: a rule, a lone bracket, an emoji) and its alignment,
        whose offsets index into ``text``.
    """
    master, handlers = _compiled(rules)
    out = _Builder()
    pos = 0
    for match in master.finditer(text):
        out.put(text[pos : match.start()], pos, match.start(), verbatim=True)
        assert match.lastgroup is not None  # every alternative is a named group
        for part in handlers[match.lastgroup](match):
            out.put(part.text, part.start, part.end, verbatim=part.verbatim)
        pos = match.end()
    out.put(text[pos:], pos, len(text), verbatim=True)
    out.read_long_numbers(digits)
    return out.result()
