"""Scoring a transcript against what a listener should hear: the ASR's spelling does not count (no model)."""

from __future__ import annotations

import pytest

from koe_bench.scoring import canonical, heard_as_expected

SAME = {
    "money": ("It costs $5 and 99 cents.", "It costs five dollars and ninety-nine cents."),
    "big money": ("Revenue grew to $4.2 billion.", "Revenue grew to four point two billion dollars."),
    "thousands": ("It sold for $1,250,000.", "It sold for one million two hundred fifty thousand dollars."),
    "time": ("The store opens at 9:30 a.m.", "The store opens at nine thirty AM."),
    "ordinal in a date": ("The deadline is January 15.", "The deadline is January fifteenth."),
    "phone": ("Dial 1-800-555-0199.", "Dial 1, 800, 5 5 5, 0 1 9 9."),
    "phone in parentheses": ("Call (555) 123-4567.", "Call 5 5 5, 1 2 3, 4 5 6 7."),
    "sign": ("It moved -2%.", "It moved minus two percent."),
    "letters": ("The F.B.I. opened it.", "The FBI opened it."),
    "web address": ("Go to example.com now.", "Go to example dot com now."),
    "e-mail address": ("Write to john.smith@gmail.com.", "Write to john dot smith at gmail dot com."),
    "Roman numeral": ("World War II ended.", "World War Two ended."),
    "regnal numeral": ("Queen Elizabeth II was crowned.", "Queen Elizabeth the Second was crowned."),
    "short range": ("Monday 9-5.", "Monday, nine to five."),
    "around the clock": ("The store is open 24-7.", "The store is open twenty-four seven."),
    "a lone one": ("Reach us at plus one. 555-123-4567", "Reach us at plus 1, 5 5 5, 1 2 3, 4 5 6 7."),
    "unit the ASR abbreviates": ("It is 30 cm long.", "It is thirty centimeters long."),
    "keyboard key": ("Press Ctrl C.", "Press control C."),
    "title": ("Dr. Lee is in.", "Doctor Lee is in."),
    "word split": ("It rains in the rainforest.", "It rains in the rain forest."),
    "trailing ellipsis": ("The three rules are... Be brief...", "The three rules are: be brief."),
    "homophone": ("Click here too. Sign up.", "Click here to sign up."),
    "the same sounds split elsewhere": ("Use time dots, leap to pause.", "Use time dot sleep to pause."),
}  # fmt: skip
DIFFERENT = {
    "a word heard differently": ("Both apples and plums work.", "Both apples and pears work."),
    "letters for a phrase": ("Bring snacks, e g fruit.", "Bring snacks, for example fruit."),
    "a link read with its address": ("Read the docs docs dot example dot com.", "Read the docs."),
    "a letter abbreviation read as capitals": ("The trip is 5 C M.", "The trip is five centimeters."),
    "another number": ("Call 555-1235.", "Call 5 5 5, 1 2 3 4."),
    "a sign lost": ("It moved 2%.", "It moved minus two percent."),
    "a range for 24/7": ("The store is open 24 to 7.", "The store is open twenty-four seven."),
    "a phone digit lost": ("My cell is 212-55-0187.", "My cell is 2 1 2, 5 5 5, 0 1 8 7."),
    "a sound lost at a word boundary": ("Use time dot leap to pause.", "Use time dot sleep to pause."),
}


@pytest.mark.parametrize(("transcript", "expected"), SAME.values(), ids=SAME.keys())
def test_the_same_speech_written_differently_passes(transcript: str, expected: str) -> None:
    assert heard_as_expected(transcript, expected), (canonical(transcript), canonical(expected))


@pytest.mark.parametrize(("transcript", "expected"), DIFFERENT.values(), ids=DIFFERENT.keys())
def test_different_speech_fails(transcript: str, expected: str) -> None:
    assert not heard_as_expected(transcript, expected)
