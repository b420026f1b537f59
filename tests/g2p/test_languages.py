"""Each language's G2P, real (no model weights needed): Kokoro's symbols, words timed where they are said,
nothing lost to the tokenizer."""

from __future__ import annotations

import logging

import pytest

from koe.engine.timing import WordSpan
from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens, vocabulary
from koe.g2p.chunk import split_phonemes
from koe.g2p.espeak import ESPEAK_VOICES
from koe.g2p.registry import G2PRegistry
from koe.g2p.symbols import keep_known
from koe.text.languages.lookup import rules_for


@pytest.fixture(scope="module")
def registry() -> G2PRegistry:
    return G2PRegistry()


def words(text: str, phonemes: str, spans: list[WordSpan]) -> list[tuple[str, str]]:
    return [(text[s.text_start : s.text_end], phonemes[s.phoneme_start : s.phoneme_end]) for s in spans]


def in_vocabulary(phonemes: str) -> bool:
    vocab = vocabulary()
    return all(symbol in vocab for symbol in phonemes)


SENTENCES = {
    "es": "¿Cómo estás? ¡Hola, amigo!",
    "fr": "Bonjour ! Les amis arrivent ce soir.",
    "hi": "नमस्ते, आप कैसे हैं?",
    "it": "Ciao, come stai oggi?",
    "pt-br": "Olá, tudo bem com você?",
    "ja": "今日はとても良い天気ですね。",
    "zh": "今天天气很好，我们去散步吧。",
}


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_every_language_reads_into_kokoro_symbols_with_each_word_timed(
    registry: G2PRegistry, lang: str
) -> None:
    text = SENTENCES[lang]
    phonemes, spans = registry.get(lang).phonemize_words(text)
    assert phonemes and in_vocabulary(phonemes)
    assert spans, "words are timed"
    previous = (0, 0)
    for span in spans:
        assert previous[0] <= span.text_start < span.text_end <= len(text)
        assert previous[1] <= span.phoneme_start < span.phoneme_end <= len(phonemes)
        assert text[span.text_start : span.text_end].strip() == text[span.text_start : span.text_end]
        previous = (span.text_end, span.phoneme_end)


def test_espeak_words_match_the_texts_one_for_one(registry: G2PRegistry) -> None:
    text = "Les amis arrivent ce soir."
    phonemes, spans = registry.get("fr").phonemize_words(text)
    assert [w for w, _ in words(text, phonemes, spans)] == ["Les", "amis", "arrivent", "ce", "soir"]
    assert words(text, phonemes, spans)[0][1] == "lez"  # liaison: the whole text is read at once


def test_the_spanish_inverted_marks_are_not_passed_on(registry: G2PRegistry) -> None:
    phonemes = registry.get("es").phonemize("¿Qué tal? ¡Bien!")
    assert "¿" not in phonemes and "¡" not in phonemes and phonemes.endswith("!")


def test_a_mark_inside_a_word_does_not_cut_off_the_rest_of_the_text(registry: G2PRegistry) -> None:
    # phonemizer splits at "." even inside "1.234" and loses what follows; the G2P reads it as a space
    phonemes, spans = registry.get("es").phonemize_words("Tengo 1.234 gatos negros.")
    assert [w for w, _ in words("Tengo 1.234 gatos negros.", phonemes, spans)][-2:] == ["gatos", "negros"]


def test_the_hindi_danda_is_a_pause_and_vowel_signs_belong_to_their_word(registry: G2PRegistry) -> None:
    text = "नमस्ते। आप कैसे हैं?"
    phonemes, spans = registry.get("hi").phonemize_words(text)
    assert "." in phonemes  # espeak alone drops the danda and runs the sentences together
    assert [w for w, _ in words(text, phonemes, spans)] == ["नमस्ते", "आप", "कैसे", "हैं"]


def test_japanese_is_romanized_as_kokoro_was_trained_and_timed_by_word(registry: G2PRegistry) -> None:
    g2p = registry.get("ja")
    assert g2p.phonemize("こんにちは。") == "koɲɲiʨiβa."
    text = "今日は3本のペンを買いました。"
    phonemes, spans = g2p.phonemize_words(text)
    assert phonemes == "kʲoː βa saɴ boɴ no peɴ o kai maɕita."  # 3本 with its counter: sambon
    assert words(text, phonemes, spans)[:4] == [("今日", "kʲoː"), ("は", "βa"), ("3", "saɴ"), ("本", "boɴ")]


def test_a_number_openjtalk_rewrites_is_timed_as_the_written_number(registry: G2PRegistry) -> None:
    text = "2025年です。"
    phonemes, spans = registry.get("ja").phonemize_words(text)
    assert {w for w, _ in words(text, phonemes, spans)} >= {"2025", "年", "です"}


def test_latin_words_in_japanese_and_mandarin_are_read_by_the_english_g2p(registry: G2PRegistry) -> None:
    english = registry.get("en-us").phonemize("Python")
    japanese, spans = registry.get("ja").phonemize_words("私はPythonが好きです。")
    assert english in japanese  # not OpenJTalk's letter-by-letter "pii wai tii eichi oo enu"
    assert ("Python", english) in words("私はPythonが好きです。", japanese, spans)
    assert english in registry.get("zh").phonemize("我们用Python写代码。")


def test_short_acronyms_stay_with_openjtalk_as_a_japanese_speaker_says_them(registry: G2PRegistry) -> None:
    assert registry.get("ja").phonemize("AIです。").startswith("eːai")


def test_mandarin_reads_as_misaki_does_and_times_each_jieba_word(registry: G2PRegistry) -> None:
    text = "你好，世界。"
    phonemes, spans = registry.get("zh").phonemize_words(text)
    assert phonemes == "ni↓xau↓, ʂɨ↘ʨje↘."
    assert words(text, phonemes, spans) == [("你好", "ni↓xau↓"), ("世界", "ʂɨ↘ʨje↘")]


def test_mandarin_numbers_are_read_by_cn2an_a_year_digit_by_digit(registry: G2PRegistry) -> None:
    g2p = registry.get("zh")
    year = g2p.phonemize("2025年")
    assert year == g2p.phonemize("二零二五年")
    assert g2p.phonemize("3.5%") == g2p.phonemize("百分之三点五")


def test_symbols_outside_the_vocabulary_are_reported_once_with_the_words_length_not_the_word_and_removed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="koe.g2p.symbols"):
        assert keep_known("a☃b", "test-lang", "snowman") == "ab"
        assert keep_known("c☃d", "test-lang", "again") == "cd"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "U+2603" in messages[0] and "of 7 characters" in messages[0]
    assert "snowman" not in messages[0]


def test_every_espeak_language_is_one_kokoro_speaks() -> None:
    assert set(ESPEAK_VOICES) == {"es", "fr", "hi", "it", "pt-br"}


@pytest.mark.parametrize("lang", ["ja", "zh", "hi"])
def test_a_long_text_is_chunked_to_the_window_at_the_language_s_clause_ends(
    registry: G2PRegistry, lang: str
) -> None:
    phonemes = registry.get(lang).phonemize(SENTENCES[lang] * 25)
    pieces = split_phonemes(phonemes)
    assert len(pieces) >= 2 and all(count_tokens(p) <= MAX_PHONEME_TOKENS for p in pieces)
    assert " ".join(pieces) == " ".join(phonemes.split())  # nothing lost
    assert all(p[-1] in ".?!," for p in pieces[:-1])  # cut after a sentence or clause, never mid-word


def test_a_japanese_voice_given_english_text_reads_it_with_the_english_g2p(registry: G2PRegistry) -> None:
    text = "Hello, how are you today?"
    assert registry.get("ja").phonemize(text) == registry.get("en-us").phonemize(text)


@pytest.mark.parametrize(
    ("lang", "written", "misread", "said"),
    [
        (
            "es",
            "Cuesta 12,50 €.",
            "ˈeʊɾo.",
            "ˈeʊɾos kon",
        ),  # "doce cincuenta euro" → "doce euros con cincuenta"
        ("ja", "¥500です。", "", "ɡoçakɯ eɴ"),  # the yen sign is not read → "gohyaku en"
        ("zh", "3-5天", "", "tau↘"),  # "three five days" → 到 "to"
        ("hi", "₹500 दीजिए।", "", "ɾˈʊpjˌeː"),  # the rupee is dropped → रुपये said
    ],
)
def test_what_the_normalizer_rewrites_is_what_the_g2p_misreads(
    registry: G2PRegistry, lang: str, written: str, misread: str, said: str
) -> None:
    g2p = registry.get(lang)
    alone = g2p.phonemize(written)
    normalized = g2p.phonemize(rules_for(lang).normalize(written).spoken)
    assert said not in alone and said in normalized
    assert not misread or (misread in alone and misread not in normalized)
