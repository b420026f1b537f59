"""The sentence gate between an LLM and the TTS, on scripted token streams: whole sentences only, none
said twice, at most the limit, and the same answer however the stream was cut into tokens."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from koe.agent.replay import tokenize
from koe.agent.sentences import SentenceGate

LOOPING = (
    "Pack plenty of water. Don't forget your camera, either. Bring a warm layer! "
    "don't forget your camera either. Don't forget your camera, either. Wear good boots."
)
SAID = "Pack plenty of water. Don't forget your camera, either. Bring a warm layer! Wear good boots."


def spoken(tokens: list[str], max_sentences: int = 10, lang: str = "en-us") -> list[str]:
    """What the gate passes on, piece by piece, as the agent feeds it (stopping once it is full)."""
    gate = SentenceGate(max_sentences, lang)
    pieces = []
    for token in tokens:
        pieces.append(gate.feed(token))
        if gate.full:
            break
    pieces.append(gate.finish())
    return [piece for piece in pieces if piece]


def test_a_sentence_said_again_is_dropped_whatever_its_case_and_punctuation() -> None:
    gate = SentenceGate(10)
    assert gate.feed(LOOPING) + gate.finish() == SAID
    assert gate.dropped == 2


def test_the_first_sentence_is_passed_on_as_written_and_later_ones_whole() -> None:
    pieces = spoken(tokenize(LOOPING))
    assert "".join(pieces) == SAID
    assert pieces[:7] == ["Pack", " plen", "ty", " of", " wate", "r", "."]  # no wait for its end
    later = [piece.strip() for piece in pieces[7:] if piece.strip()]
    assert later == ["Don't forget your camera, either.", "Bring a warm layer!", "Wear good boots."]


def test_the_answer_stops_at_the_sentence_limit_and_the_gate_says_it_is_full() -> None:
    gate = SentenceGate(2)
    text = "One thing. Two things. Three things."
    assert gate.feed(text[:23]) == "One thing. Two things. "  # the space after "things." proves the end
    assert gate.full
    assert gate.feed(text[23:]) == "" and gate.finish() == ""


def test_a_later_sentence_cut_off_by_the_token_cap_is_never_passed_on() -> None:
    assert "".join(spoken(tokenize("Bring water. Wear good boots and a"))) == "Bring water. "


def test_a_first_sentence_already_on_its_way_is_finished_even_if_it_repeats() -> None:
    gate = SentenceGate(3)
    assert gate.feed("Bring water") == "Bring water"
    assert gate.feed(" and a") == " and a"
    assert gate.finish() == ""


def test_an_answer_without_any_sentence_end_is_passed_on_as_written() -> None:
    gate = SentenceGate(3)
    assert gate.feed("Paris") == "Paris"
    assert gate.finish() == ""


def test_abbreviations_and_decimals_do_not_end_a_sentence() -> None:
    pieces = spoken(tokenize("Hi. Dr. Smith paid 3.5 dollars. Then he left."))
    assert pieces[-2:] == ["Dr. Smith paid 3.5 dollars. ", "Then he left."]


def test_japanese_sentences_end_at_their_own_marks() -> None:
    text = "ミケです。タマはいい名前です。タマはいい名前です。ミケもかわいい"
    pieces = spoken(list(text), lang="ja")
    assert "".join(pieces) == "ミケです。タマはいい名前です。"
    assert pieces[-1] == "タマはいい名前です。"


def test_a_line_or_an_emoji_alone_is_not_a_sentence_and_stays_with_the_next() -> None:
    gate = SentenceGate(2)
    assert gate.feed("Have fun! 😊\nSee you soon. Bye.") == "Have fun! 😊\nSee you soon. "


@given(st.lists(st.integers(min_value=0, max_value=len(LOOPING)), max_size=30))
def test_the_answer_does_not_depend_on_how_the_stream_was_cut_into_tokens(cuts: list[int]) -> None:
    points = sorted({0, len(LOOPING), *cuts})
    tokens = [LOOPING[a:b] for a, b in itertools.pairwise(points)]
    assert "".join(spoken(tokens)) == SAID
    assert "".join(spoken(tokens, max_sentences=3)).rstrip() == SAID[: SAID.index("!") + 1]
