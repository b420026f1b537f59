"""Where, in a realistic streamed answer, the first segment is emitted: koe's first-clause policy vs the
naive sentence regex ``(?<=[.!?])\\s+`` that the AWS sample applies in its client."""

from __future__ import annotations

import re

import pytest

from koe.text.segment import Segmenter

NAIVE = re.compile(r"(?<=[.!?])\s+")
#: LLM-like tokens: a word with its leading space, or a run of punctuation, or whitespace.
TOKEN = re.compile(r"\s?\w+|\s?[^\w\s]+|\s+")

ANSWERS = {
    "clause first": (
        "Sure, I can walk you through that, step by step. First, preheat the oven to 180 degrees. "
        "Then mix the flour and the sugar in a large bowl.",
        True,
    ),
    "colon first": (
        "Here is what I found: the museum opens at 9:30 on weekdays and at 10 on weekends. Tickets cost $12.",
        True,
    ),
    "a dash": (
        "The clinic on Main Street — the one near the park — is open until six tonight. Call ahead.",
        True,
    ),
    "sentence first": ("Yes. The train leaves at 5 p.m. from platform 3, so you have time.", False),
    "question first": ("Good question! Paris has about 2.1 million people, and the metro area more.", False),
}


def koe_first_at(tokens: list[str]) -> int:
    seg, fed = Segmenter(), 0
    for token in tokens:
        fed += len(token)
        if seg.feed(token):
            return fed
    return fed


def naive_first_at(tokens: list[str]) -> int:
    text = ""
    for token in tokens:
        text += token
        if NAIVE.search(text):
            return len(text)
    return len(text)


@pytest.mark.parametrize(("answer", "clause_first"), ANSWERS.values(), ids=ANSWERS.keys())
def test_first_segment_is_emitted_no_later_than_the_naive_regex(answer: str, clause_first: bool) -> None:
    tokens = TOKEN.findall(answer)
    assert "".join(tokens) == answer
    ours, naive = koe_first_at(tokens), naive_first_at(tokens)
    if clause_first:
        assert ours < naive, (ours, naive)
    else:
        assert ours <= naive, (ours, naive)


def test_first_clause_is_emitted_at_the_token_that_proves_it() -> None:
    tokens = TOKEN.findall(ANSWERS["clause first"][0])
    ours = koe_first_at(tokens)
    # "Sure, I can walk you through that," is certain once " step" shows the comma is followed by a space
    assert ANSWERS["clause first"][0][:ours] == "Sure, I can walk you through that, step"
    assert naive_first_at(tokens) == len("Sure, I can walk you through that, step by step. First")


def test_an_abbreviation_fools_the_naive_regex_but_not_the_segmenter() -> None:
    answer = "Dr. Smith's clinic — the one on Main Street — is open until six tonight."
    tokens = TOKEN.findall(answer)
    assert NAIVE.split(answer)[0] == "Dr."
    seg = Segmenter()
    first = next(s for token in tokens for s in seg.feed(token))
    assert first.text == "Dr. Smith's clinic —"
