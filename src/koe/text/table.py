"""Markdown table rows, read the way a person reads a table aloud: each row as "key: values." on its own.

A row is its own segment (the segmenter cuts at every line break).  Its first cell is what the row is
about, so a colon follows it and commas the other cells: ``| Sync | Yes |`` is "Sync: Yes.",
``| Speed | 10 | 20 |`` "Speed: 10, 20."; a row closed by a pipe ends with a period.  Read with commas
only and no period, the row's last word trailed off into the next segment and was heard wrong ("Name,
Age" as "Name A", "Export, No" as "Export now"; docs/text.md).  Empty cells are skipped, and so are cells
with nothing to say (an emoji), with their separators.

The handlers look only at the line the match is on, which is within its segment, so the reading does not
depend on how the text arrived.
"""

from __future__ import annotations

import re

from koe.text.say import Rule, Say, drop, say

#: A cell has something to say when it has a letter or a digit.
_SPEAKABLE = re.compile(r"[^\W_]")
#: A row's last cell already ends what it says.
_ENDED = re.compile(r"[.!?:;,]\W*$")


def _line(m: re.Match[str]) -> tuple[list[str], list[str]]:
    """The cells of ``m``'s row before and after the match, the row's edge pipes left out (one each side:
    "| | B" has an empty first cell)."""
    text = m.string
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    before = text[start : m.start()].lstrip(" \t").removeprefix("|")
    after = text[m.end() : len(text) if end < 0 else end].rstrip(" \t").removesuffix("|")
    return before.split("|"), after.split("|")


def _said(cell: str) -> bool:
    return _SPEAKABLE.search(cell) is not None


def _separator(m: re.Match[str]) -> list[Say]:
    """A pipe between cells: ": " after the row's first cell, ", " between later ones, nothing beside an
    empty cell."""
    before, after = _line(m)
    if not _said(before[-1]) or not any(_said(cell) for cell in after):
        return drop(m)
    return [Say(": " if len(before) == 1 else ", ", m.start(), m.end())]


def _row_end(m: re.Match[str]) -> list[Say]:
    """The pipe closing a row: a period, unless the row has nothing to say or already ends in punctuation."""
    said = [cell for cell in _line(m)[0] if _said(cell)]
    if not said or _ENDED.search(said[-1].rstrip()):
        return drop(m)
    return [Say(".", m.start(), m.end())]


_ROW_END = r"[ \t]*\|[ \t]*$"
_CELL = r"[ \t]*\|[ \t]*"
_TABLE_RULE = ("table_rule", r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+(?:[ \t]*:?-{3,}:?[ \t]*)?$", drop)
_ROW_START = ("row_start", r"^[ \t]*\|[ \t]*", drop)

#: English's table rules, in priority order (inside the markup rules of :mod:`koe.text.spoken`).
TABLE_RULES: tuple[Rule, ...] = (
    _TABLE_RULE,
    _ROW_START,
    ("row_end", _ROW_END, _row_end),
    ("cell", _CELL, _separator),
)
#: Other languages' (:mod:`koe.text.languages.markup`): cells between commas, nothing at a row's end,
#: until the reading above is measured in them.
PLAIN_TABLE_RULES: tuple[Rule, ...] = (
    _TABLE_RULE,
    _ROW_START,
    ("row_end", _ROW_END, drop),
    ("cell", _CELL, say(", ")),
)
