from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens
from koe.g2p.chunk import split_phonemes, split_text

_WORD = st.text(alphabet="həlˈOðɛɹdɑktsmɪθpAfTiwn", min_size=1, max_size=14)
_PUNCT = st.sampled_from(["", "", "", ",", "."])


@given(st.lists(st.tuples(_WORD, _PUNCT), min_size=1, max_size=300), st.integers(20, MAX_PHONEME_TOKENS))
def test_pieces_fit_the_window_and_keep_every_word_whole(
    words: list[tuple[str, str]], max_tokens: int
) -> None:
    phonemes = " ".join(word + punct for word, punct in words)
    pieces = split_phonemes(phonemes, max_tokens)
    assert all(count_tokens(piece) <= max_tokens for piece in pieces)
    assert " ".join(pieces).split() == phonemes.split()


def test_short_strings_stay_whole() -> None:
    assert split_phonemes("həlˈO ðˈɛɹ.") == ["həlˈO ðˈɛɹ."]


def test_empty_string_gives_no_pieces() -> None:
    assert split_phonemes("   ") == []


def test_cut_prefers_the_end_of_a_clause() -> None:
    phonemes = "aaaa bbbb, cccc dddd eeee"
    assert split_phonemes(phonemes, max_tokens=18) == ["aaaa bbbb,", "cccc dddd eeee"]


def test_a_word_longer_than_the_window_is_cut_rather_than_dropped() -> None:
    pieces = split_phonemes("a" * 25, max_tokens=10)
    assert "".join(pieces) == "a" * 25
    assert all(count_tokens(piece) <= 10 for piece in pieces)


_TEXT = st.text(alphabet=st.sampled_from("ab 3.,!?、。五\n"), max_size=400)


@given(_TEXT, st.integers(1, 60))
def test_text_chunks_cover_the_text_in_order_within_the_limit(text: str, max_chars: int) -> None:
    chunks = split_text(text, max_chars)
    assert "".join(text[start:end] for start, end in chunks) == text
    assert all(0 < end - start <= max_chars for start, end in chunks if text)


def test_a_text_is_cut_after_a_sentence_before_a_clause_and_never_inside_a_number() -> None:
    text = "Pi is 3.14159, roughly. Then 1,234 more words follow here"
    assert [text[a:b] for a, b in split_text(text, 40)] == [
        "Pi is 3.14159, roughly. ",
        "Then 1,234 more words follow here",
    ]
    assert [text[a:b] for a, b in split_text(text, 16)][:2] == ["Pi is 3.14159, ", "roughly. "]


def test_cjk_text_is_cut_after_its_marks_without_a_space() -> None:
    text = "五五五五、五五五五。五五五五"
    assert [text[a:b] for a, b in split_text(text, 10)] == ["五五五五、五五五五。", "五五五五"]
