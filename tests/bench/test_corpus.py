"""The reading corpus as data: big enough, every group the issue names, well formed (no model)."""

from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe_bench import corpus

#: The kinds of LLM-style text the corpus must cover, each with enough texts for a pass rate.
GROUPS = {
    "money", "percentages", "dates_times", "ranges", "units", "ordinals", "phone_numbers",
    "acronyms_words", "acronyms_letters", "abbreviations_phrases", "emphasis", "headings", "lists",
    "tables", "links", "code", "urls_emails", "emoji", "parentheses", "quotes",
}  # fmt: skip
MIN_TEXTS = 200
MIN_PER_GROUP = 10


def test_the_corpus_covers_every_group_with_enough_texts() -> None:
    readings = corpus.load()
    assert len(readings) >= MIN_TEXTS
    assert set(corpus.groups(readings)) == GROUPS
    assert all(sum(r.group == g for r in readings) >= MIN_PER_GROUP for g in GROUPS)
    assert len({r.text for r in readings}) == len(readings), "no text twice"


def test_a_sample_takes_one_text_per_group_before_a_second() -> None:
    readings = corpus.load()
    picked = corpus.sample(readings, len(GROUPS) + 1)
    assert [r.group for r in picked[: len(GROUPS)]] == corpus.groups(readings)
    first_group = [r for r in readings if r.group == picked[0].group]
    assert picked[0] == first_group[0] and picked[-1] == first_group[1]
    assert sorted(corpus.sample(readings, 10_000), key=readings.index) == list(readings)


@pytest.mark.parametrize(
    "entries",
    [
        {"group": "money"},
        ["not an object"],
        [{"group": "money", "text": "Hi.", "spoken": "Hi."}],
        [{"group": "money", "text": "Hi.", "spoken": "Hi.", "heard": 3}],
        [{"group": "money", "text": " ", "spoken": "Hi.", "heard": "Hi."}],
    ],
)
def test_malformed_entries_are_refused_with_what_was_expected(entries: object) -> None:
    with pytest.raises(ConfigError, match="expected"):
        corpus.parse(entries)
