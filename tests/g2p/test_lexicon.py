"""misaki's dictionaries are grown once and read back from koe's cache exactly as grown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from misaki import en

from koe.g2p.lexicon import grown_dictionary

NAME = "us_gold.json"


class _CountedGrow:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, words: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        grown: dict[str, Any] = en.Lexicon.grow_dictionary(words)
        return grown


def test_a_dictionary_grown_once_is_read_back_identical_without_growing(tmp_path: Path) -> None:
    grow = _CountedGrow()
    first = grown_dictionary(NAME, grow, tmp_path)
    again = grown_dictionary(NAME, grow, tmp_path)
    assert grow.calls == 1 and again == first and len(list(tmp_path.glob("*.marshal"))) == 1
    assert first["Hello"] == first["hello"]  # grown: the capitalized twin is there


def test_a_damaged_kept_dictionary_is_grown_again_and_replaced(tmp_path: Path) -> None:
    expected = grown_dictionary(NAME, _CountedGrow(), tmp_path)
    (kept,) = tmp_path.glob("*.marshal")
    kept.write_bytes(b"\x00 not marshal")
    grow = _CountedGrow()
    assert grown_dictionary(NAME, grow, tmp_path) == expected and grow.calls == 1
    assert grown_dictionary(NAME, grow, tmp_path) == expected and grow.calls == 1  # replaced


def test_an_unwritable_cache_costs_only_the_growing(tmp_path: Path) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    grow = _CountedGrow()
    assert grown_dictionary(NAME, grow, blocked / "g2p") == grown_dictionary(NAME, grow, blocked / "g2p")
    assert grow.calls == 2
