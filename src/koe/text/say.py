"""What a normalizer rule produces: spoken parts, each carrying the source span it stands for.

A rule is ``(name, regex, handler)``; the handler turns a match into :class:`Say` parts.  The helpers build
the common handlers: drop the match, erase it, keep one group, or say fixed words instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Say:
    """Spoken text for the source span ``[start, end)``; ``verbatim`` text is a copy of that span."""

    text: str
    start: int
    end: int
    verbatim: bool = False


Handler = Callable[[re.Match[str]], list[Say]]
Rule = tuple[str, str, Handler]

_SPACES = re.compile(r"\s*")


def drop(m: re.Match[str]) -> list[Say]:
    """The match becomes a space (a marker between words)."""
    return [Say(" ", m.start(), m.end())]


def erase(m: re.Match[str]) -> list[Say]:
    """Markup glued to a word (``**bold**``, backticks) vanishes without leaving a space."""
    return []


def keep(group: str) -> Handler:
    """Say only the named group, verbatim (link text, image alt text, the digits of a list number)."""

    def handler(m: re.Match[str]) -> list[Say]:
        return [Say(m.group(group), m.start(group), m.end(group), verbatim=True)]

    return handler


def say(words: str) -> Handler:
    """Say ``words`` for the whole match."""

    def handler(m: re.Match[str]) -> list[Say]:
        return [Say(words, m.start(), m.end())]

    return handler


def verbatim(m: re.Match[str], group: str) -> Say:
    """The named group of ``m`` as it was written."""
    return Say(m.group(group), m.start(group), m.end(group), verbatim=True)


def at_end(m: re.Match[str]) -> bool:
    """Whether nothing but spaces follows the match in the text being normalized (a segment)."""
    return _SPACES.fullmatch(m.string, m.end()) is not None
