"""Numbers no G2P of koe's cannot read or reads in superlinear time: Mandarin decimals read one by one
(all of them), a Mandarin whole part past cn2an's reach, Japanese romanized in work linear in the text,
English numbers in words up to the normalizer's ceiling, a Japanese zero."""

from __future__ import annotations

from typing import Any

import pytest

from koe.g2p.registry import G2PRegistry
from koe.text.languages.lookup import rules_for

pytest.importorskip("cn2an", reason="the Mandarin G2P is not installed")
pytest.importorskip("pyopenjtalk", reason="the Japanese G2P is not installed")

JAPANESE = "今日は天気がいいので、公園に散歩に行きました。「桜の花が、とてもきれいでした！」と言った。"


@pytest.fixture(scope="module")
def registry() -> G2PRegistry:
    return G2PRegistry()


def test_mandarin_decimals_are_all_read_one_by_one(registry: G2PRegistry) -> None:
    """cn2an cut them at 16 digits, with a warning (an error under this suite's warning filter)."""
    g2p = registry.get("zh")
    assert g2p.phonemize("3.14159265358979323846") == g2p.phonemize(
        "三点一四一五九二六五三五八九七九三二三八四六"
    )
    assert g2p.phonemize("0.05") == g2p.phonemize("零点零五")


def test_a_mandarin_whole_part_past_cn2an_s_reach_is_read_digit_by_digit(registry: G2PRegistry) -> None:
    g2p = registry.get("zh")
    assert g2p.phonemize("12345678901234567") == g2p.phonemize("一二三四五六七八九零一二三四五六七")
    assert g2p.phonemize("1234567890123456") == g2p.phonemize(
        "一千二百三十四万五千六百七十八亿九千零一十二万三千四百五十六"
    )


def _words(registry: G2PRegistry, text: str) -> tuple[Any, list[Any]]:
    """The Japanese G2P's romanizer and ``text``'s OpenJTalk words as its words."""
    g2p: Any = registry.get("ja")
    nodes = g2p._openjtalk.run_frontend(text, use_sudachi_kanji_yomi=False)
    return g2p._romanizer, [g2p._word(node) for node in nodes]


def test_japanese_romanized_clause_by_clause_gives_the_tokens_of_the_whole_text(
    registry: G2PRegistry,
) -> None:
    romanizer, words = _words(registry, JAPANESE * 3)
    whole = [(token.surface, token.space) for token in romanizer._romaji_tokens(words)]
    tokens, groups = romanizer.tokens(words)
    assert [(token.surface, token.space) for token in tokens] == whole
    assert sum(groups) == len(words)


def test_japanese_romanizing_does_work_linear_in_the_text(
    registry: G2PRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The romanizer's dictionary lookups, counted: it once joined every word after each word (cubic)."""
    from misaki import cutlet

    lookups = 0

    class Counted(frozenset[str]):
        def __contains__(self, key: object) -> bool:
            nonlocal lookups
            lookups += 1
            return super().__contains__(key)

    monkeypatch.setattr(cutlet, "JA_WORDS", Counted(cutlet.JA_WORDS))

    def work(copies: int) -> int:
        nonlocal lookups
        romanizer, words = _words(registry, JAPANESE * copies)
        lookups = 0
        romanizer.tokens(words)
        return lookups

    assert work(16) <= 16 * 1.1 * work(1)


def test_english_numbers_are_words_up_to_the_hundreds_of_trillions_and_a_code_past_them(
    registry: G2PRegistry,
) -> None:
    """misaki reads them with num2words; the normalizer leaves 15 digits to it and reads 16 one by one."""
    g2p, rules = registry.get("en-us"), rules_for("en-us")
    trillion = g2p.phonemize("trillion")
    for written in ("$34,000,000,000,000", "999,999,999,999,999"):
        assert trillion in g2p.phonemize(rules.normalize(written).spoken)
    code = g2p.phonemize(rules.normalize("9999999999999999").spoken)
    assert code == g2p.phonemize("9 9 9 9, 9 9 9 9, 9 9 9 9, 9 9 9 9")


@pytest.mark.parametrize(
    ("written", "said"), [("0", "ゼロ"), ("0.5", "〇点五"), ("10.05", "十点〇五"), ("0円", "ゼロ円")]
)
def test_japanese_zero_is_read_alone_and_in_decimals(registry: G2PRegistry, written: str, said: str) -> None:
    """OpenJTalk leaves a zero it reads alone as the digit ０, which misaki's romanizer once refused."""
    g2p = registry.get("ja")
    phonemes, spans = g2p.phonemize_words(rules_for("ja").normalize(written).spoken)
    assert phonemes == g2p.phonemize(said) and spans
