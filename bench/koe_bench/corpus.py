"""The reading corpus: short texts in the style of LLM answers, each with what a listener should hear.

Markdown, links, code, abbreviations, units, prices, dates, ranges, list markers and emoji, in groups
(``money``, ``links``, ``abbreviations_phrases``...).  Each entry has the ``text`` as an assistant writes
it, ``heard``: the words a listener expects (scored by :mod:`koe_bench.scoring` against an ASR
transcript), and ``spoken``: what koe's segmenter and normalizer hand to G2P, the segments' spoken texts
joined by spaces (checked without a model in tests/text).  docs/text.md shows what is read how.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

from koe.errors import ConfigError

CORPUS_FILE = "corpus.json"
_FIELDS = ("group", "text", "spoken", "heard")


@dataclass(frozen=True, slots=True)
class Reading:
    """One corpus text: what the LLM wrote, what koe gives G2P, and what a listener should hear."""

    group: str
    text: str
    spoken: str
    heard: str


def load() -> tuple[Reading, ...]:
    """Every entry of the packaged corpus, in the file's order (groups together)."""
    return parse(json.loads(files("koe_bench").joinpath(CORPUS_FILE).read_text(encoding="utf-8")))


def parse(entries: object) -> tuple[Reading, ...]:
    """Corpus entries from their JSON form: a list of objects with the four fields.

    Raises:
        ConfigError: not a list, or an entry lacks a field or has one that is not a non-empty string.
    """
    if not isinstance(entries, list):
        raise ConfigError(f"corpus: expected a list of entries, got {type(entries).__name__}")
    readings = []
    for index, entry in enumerate(entries):
        values = [entry.get(name) for name in _FIELDS] if isinstance(entry, dict) else []
        strings = [value for value in values if isinstance(value, str) and value.strip()]
        if len(strings) != len(_FIELDS):
            raise ConfigError(f"corpus entry {index}: expected strings {', '.join(_FIELDS)}, got {entry!r}")
        readings.append(Reading(*strings))
    return tuple(readings)


def groups(readings: Sequence[Reading]) -> list[str]:
    """The groups of ``readings`` in order of first appearance."""
    return list(dict.fromkeys(r.group for r in readings))


def sample(readings: Sequence[Reading], count: int) -> list[Reading]:
    """``count`` readings spread over the groups: the first of each group in turn, then the second..."""
    by_group = {group: [r for r in readings if r.group == group] for group in groups(readings)}
    rounds = max((len(members) for members in by_group.values()), default=0)
    spread = [members[i] for i in range(rounds) for members in by_group.values() if i < len(members)]
    return spread[:count]
