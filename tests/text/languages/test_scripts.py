from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.languages import CODES
from koe.text.languages.scripts import check_script, foreign_script


@pytest.mark.parametrize(
    ("lang", "text"),
    [("ja", "今日はAIとPythonの話です。"), ("zh", "我们用Python写代码。"), ("hi", "मैं Python सीख रहा हूँ।"),
     ("es", "¿Qué tal? Ça va, danke schön."), ("en-us", "Café, naïve, résumé.")],
)  # fmt: skip
def test_each_language_reads_its_own_script_and_latin_letters(lang: str, text: str) -> None:
    assert foreign_script(text, lang) is None
    check_script(text, lang)


@pytest.mark.parametrize(
    ("lang", "text", "script", "reader"),
    [("es", "Hola こんにちは", "Japanese kana", "ja"),
     ("en-us", "Say 你好 please", "Chinese characters", "zh"),
     ("zh", "你好，こんにちは", "Japanese kana", "ja"), ("fr", "Bonjour नमस्ते", "Devanagari", "hi"),
     ("ja", "안녕하세요", "Korean hangul", None), ("it", "Привет", "Cyrillic", None)],
)  # fmt: skip
def test_a_script_the_language_cannot_read_is_a_clear_error(
    lang: str, text: str, script: str, reader: str | None
) -> None:
    with pytest.raises(ConfigError) as raised:
        check_script(text, lang)
    error = raised.value
    assert error.code == "unsupported_script"
    assert script in error.message and f"lang {lang}" in error.message
    assert (f"lang {reader}" in error.message) if reader else "no Kokoro language" in error.message


@pytest.mark.parametrize("lang", CODES)
def test_punctuation_digits_and_emoji_are_no_foreign_script(lang: str) -> None:
    assert foreign_script("12:30 — 50% «ok» 👋 ™ ★", lang) is None
