"""Segmentation per language: sentence and clause marks, the first-clause rule in the language's units,
abbreviations — each case fails if its rule breaks."""

from __future__ import annotations

import re

import pytest

from koe.text.languages.lookup import CHARS_PER_CHAR, rules_for, segmenter_for
from koe.text.languages.units import hindi_words, japanese_morae, mandarin_syllables
from koe.text.segment import STRAND_CHARS

HIRAGANA = r"[\u3041-\u3096]"


def cut(lang: str, text: str, limit: int | None = None) -> list[str]:
    segmenter = segmenter_for(lang)
    segmenter.set_next_limit(limit)
    return [s.text for s in (*segmenter.feed(text), *segmenter.flush())]


def test_japanese_sentences_end_at_the_ideographic_full_stop_and_marks() -> None:
    text = "今日は晴れです。明日は雨が降るでしょう！本当ですか？はい。そうです。"
    # はい。 is short (under 20 English characters of speech): merged with the next sentence
    assert cut("ja", text) == [
        "今日は晴れです。",
        "明日は雨が降るでしょう！",
        "本当ですか？",
        "はい。そうです。",
    ]


def test_a_japanese_first_clause_needs_five_morae_not_three_characters() -> None:
    # はい、 is two morae: too short to stand alone; そうですね、 (5 morae) may
    assert cut("ja", "はい、わかりました。")[0] == "はい、わかりました。"
    assert cut("ja", "そうですね、明日また話しましょう。")[0] == "そうですね、"


def test_kanji_weigh_two_morae_and_small_kana_none() -> None:
    assert len(japanese_morae("今日")) == 4
    assert len(japanese_morae("きょう")) == 2  # kyo-u
    assert len(japanese_morae("AIと3回")) == 5  # AI, と, 3, 回 (two)


def test_a_mandarin_first_clause_needs_four_syllables() -> None:
    assert cut("zh", "好的，我明白了。")[0] == "好的，我明白了。"
    assert cut("zh", "当然可以，我们明天见。")[0] == "当然可以，"
    assert len(mandarin_syllables("我用Python写")) == 4


def test_chinese_clause_marks_cut_a_long_sentence_within_its_limit() -> None:
    text = "今天的天气非常好，我们一起去公园散步吧，然后再去看一场电影，最后回家吃晚饭。"
    out = cut("zh", text, limit=20)
    slack = round(STRAND_CHARS / CHARS_PER_CHAR["zh"])  # a clause ending just past the limit is kept whole
    assert all(len(piece) <= 20 + slack for piece in out) and len(out) >= 2
    assert all(piece.endswith(("，", "。")) for piece in out)


def test_a_spanish_question_is_not_cut_at_its_inner_commas() -> None:
    text = "Bueno, ¿quieres, tal vez, un café con leche? ¡Claro que sí, amigo!"
    assert cut("es", text) == ["Bueno, ¿quieres, tal vez, un café con leche?", "¡Claro que sí, amigo!"]


def test_outside_inverted_marks_a_spanish_first_clause_is_cut_as_in_english() -> None:
    assert cut("es", "Muy bien, gracias por preguntar. ¿Y tú?")[0] == "Muy bien, gracias por preguntar."
    assert cut("es", "Sí, claro que sí, mañana te llamo.")[0] == "Sí, claro que sí,"


def test_french_spacing_before_question_and_exclamation_marks_still_ends_the_sentence() -> None:
    out = cut("fr", "Bonjour tout le monde ! Comment allez-vous aujourd'hui ? Très bien, merci.")
    assert out == ["Bonjour tout le monde !", "Comment allez-vous aujourd'hui ?", "Très bien, merci."]
    # a narrow no-break space, as French typography writes it
    assert cut("fr", "Vraiment\u202f? Oui, vraiment.")[0] == "Vraiment\u202f?"


def test_a_spaced_mark_inside_a_word_is_no_sentence_end() -> None:
    assert cut("fr", "Alors a !b reste ensemble.") == ["Alors a !b reste ensemble."]


def test_the_hindi_danda_ends_a_sentence_with_or_without_a_space_before_it() -> None:
    text = "नमस्ते, आप कैसे हैं। मैं बिल्कुल ठीक हूँ, धन्यवाद । आज मौसम बहुत अच्छा है॥"
    assert cut("hi", text) == ["नमस्ते, आप कैसे हैं।", "मैं बिल्कुल ठीक हूँ, धन्यवाद ।", "आज मौसम बहुत अच्छा है॥"]


def test_hindi_words_keep_their_vowel_signs() -> None:
    assert len(hindi_words("नमस्ते आप कैसे हैं")) == 4


@pytest.mark.parametrize(
    ("lang", "text"),
    [("es", "La Sra. García y el Dr. Pérez llegaron tarde."),
     ("fr", "M. Dupont et Mme Martin sont arrivés."),
     ("it", "Il Sig. Rossi e il Dott. Bianchi sono arrivati."),
     ("pt-br", "A Sra. Silva e o Dr. Souza chegaram.")],
)  # fmt: skip
def test_each_language_s_titles_do_not_end_a_sentence(lang: str, text: str) -> None:
    assert cut(lang, text) == [text]


def test_a_spanish_no_ends_a_sentence_though_english_no_does_not() -> None:
    assert cut("es", "Creo que no. Mañana lo vemos con calma.") == [
        "Creo que no.",
        "Mañana lo vemos con calma.",
    ]
    assert cut("en-us", "See No. 5 on the list.") == ["See No. 5 on the list."]


def test_cjk_segments_are_shorter_in_characters_for_the_same_speech() -> None:
    assert rules_for("ja").chars_per_char > 1 and rules_for("zh").chars_per_char > 1
    text = "あ" * 400
    assert max(len(s) for s in cut("ja", text)) < max(len(s) for s in cut("en-us", "a " * 200))


def test_a_long_japanese_sentence_is_cut_after_a_particle_not_inside_a_kanji_compound() -> None:
    text = "東京都庁の展望台から富士山がよく見える日は本当に少ないそうです。"
    out = cut("ja", text, limit=12)
    assert "".join(out) == text and len(out) >= 2
    end = 0
    for piece in out[:-1]:
        end += len(piece)
        assert re.match(HIRAGANA, text[end - 1]) and not re.match(HIRAGANA, text[end]), out
