"""Normalization per language: what each G2P misreads is rewritten as a speaker of the language says it;
markdown and emoji are dropped in every language; every spoken character points back at its source."""

from __future__ import annotations

import pytest

from koe.languages import CODES
from koe.text.languages.lookup import rules_for


def spoken(lang: str, text: str) -> str:
    return rules_for(lang).normalize(text).spoken


@pytest.mark.parametrize(
    ("lang", "text", "said"),
    [
        ("es", "Son las 3:45.", "Son las 3 y 45."),
        ("es", "A las 14:00.", "A las 14 en punto."),
        ("es", "Cuesta 12,50 € o 1 €.", "Cuesta 12 euros con 50 o 1 euro."),
        ("es", "Son $5 o R$ 20.", "Son 5 dólares o 20 reales."),
        ("es", "Hay 1.234 gatos y 3,5 kg.", "Hay 1234 gatos y 3 coma 5 kg."),
        ("es", "El 2025-03-01 o el 15/04/2025.", "El 1 de marzo de 2025 o el 15 de abril de 2025."),
        ("es", "Hace -5 °C, de 3-5 días.", "Hace menos 5 grados centígrados, de 3 a 5 días."),
        ("es", "El 1.º premio.", "El 1º premio."),
        ("fr", "Il est 14:30, ça coûte 12,50 €.", "Il est 14 heures 30, ça coûte 12 euros 50."),
        ("fr", "Le 01/03/2025, 1 234 personnes.", "Le 1er mars 2025, 1234 personnes."),
        ("fr", "Il est 1:00.", "Il est 1 heure."),
        ("it", "Alle 14:30 costa 12,50 €.", "Alle 14 e 30 costa 12 euro e 50."),
        ("it", "Il 2025-03-01.", "Il 1º marzo 2025."),
        ("pt-br", "Custa R$ 12,50 às 14:00.", "Custa 12 reais e 50 centavos às 14 horas."),
        ("pt-br", "Em 2025-03-01.", "Em 1º de março de 2025."),
        ("hi", "मेरे पास ₹1,234.50 हैं।", "मेरे पास 1234 रुपये 50 पैसे हैं।"),
        ("hi", "14:30 पर, 3.5 किलो।", "14 बजकर 30 मिनट पर, 3 दशमलव 5 किलो।"),
        ("hi", "2025-03-01 को ₹1।", "1 मार्च 2025 को 1 रुपया।"),
        ("ja", "会議は14:30から。", "会議は14時30分から。"),
        ("ja", "2025-03-01に、$5と¥500。", "2025年3月1日に、5ドルと500円。"),
        ("ja", "気温は-5°C、3〜5人。", "気温はマイナス5度、3から5人。"),
        ("ja", "１２：００です。", "12時です。"),
        ("ja", "#3、1/2。", "3番、2分の1。"),
        ("zh", "会议在14:30开始。", "会议在14点30分开始。"),
        ("zh", "2025-03-01，$5和¥12.50。", "2025年3月1日，5美元和12.50元。"),
        ("zh", "1,234人，3-5天，-5°C。", "1234人，3到5天，负5度。"),
        ("es", "Escribe a ana.lopez@correo.es o ve a https://www.ejemplo.com/ayuda.",
         "Escribe a ana lopez arroba correo punto es o ve a ejemplo punto com."),
        ("ja", "詳しくはhttps://example.com/docsへ。", "詳しくは example ドット com へ。"),
        ("ja", "メールはa.b@example.jpへ。", "メールは a b アット example ドット jp へ。"),
    ],
)  # fmt: skip
def test_what_the_g2p_misreads_is_said_as_the_language_says_it(lang: str, text: str, said: str) -> None:
    assert spoken(lang, text) == said


@pytest.mark.parametrize(
    ("lang", "text", "said"),
    [
        ("es", "El 25:70 no es una hora.", "El 25:70 no es una hora."),
        ("es", "La versión 3.11.7.", "La versión 3.11.7."),
        ("ja", "99:99は時刻ではない。", "99:99は時刻ではない。"),
        ("es", "Hasta el 40/13/2025.", "Hasta el 40/13/2025."),
    ],
)  # fmt: skip
def test_what_only_looks_like_a_time_or_date_is_left_as_written(lang: str, text: str, said: str) -> None:
    assert spoken(lang, text) == said


MARKDOWN = {
    "en-us": ("## **Hello** there 👋", "Hello there"),
    "en-gb": ("- *Right*, [see](http://x.org) 🎉", "Right, see"),
    "es": ("## **Hola** amigo 👋", "Hola amigo"),
    "fr": ("> *Bonjour* `code` 🎉", "Bonjour code"),
    "hi": ("1. **नमस्ते** 🙏", "1. नमस्ते"),
    "it": ("- __Ciao__ ![img](a.png) 😀", "Ciao img"),
    "pt-br": ("| Olá 🌍 | mundo |", "Olá, mundo"),
    "ja": ("## **こんにちは**、世界😀", "こんにちは、世界"),
    "zh": ("- **你好**，世界🎉", "你好，世界"),
}


@pytest.mark.parametrize("lang", CODES)
def test_markdown_and_emoji_are_dropped_in_every_language(lang: str) -> None:
    text, said = MARKDOWN[lang]
    assert spoken(lang, text) == said


@pytest.mark.parametrize("lang", CODES)
def test_each_spoken_character_points_back_into_the_source(lang: str) -> None:
    text = "**12,50 €** 14:30 2025-03-01 ₹5 $5 -5°C 😀 " + MARKDOWN[lang][0]
    result = rules_for(lang).normalize(text)
    spans = list(zip(result.alignment.starts, result.alignment.ends, strict=True))
    assert len(spans) == len(result.spoken)
    assert all(0 <= a <= b <= len(text) for a, b in spans)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)
