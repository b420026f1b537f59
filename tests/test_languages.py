from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.languages import CODES, LANGUAGES, language, of_voice


def test_every_kokoro_language_has_a_code_and_its_own_voice_letter() -> None:
    assert CODES == ("en-us", "en-gb", "es", "fr", "hi", "it", "ja", "pt-br", "zh")
    assert len({lang.prefix for lang in LANGUAGES}) == len(LANGUAGES)


@pytest.mark.parametrize(
    ("given", "code"),
    [("ja", "ja"), ("JA", "ja"), ("ja-JP", "ja"), ("ja_jp", "ja"), ("pt", "pt-br"), ("PT_BR", "pt-br"),
     ("fr-FR", "fr"), ("cmn", "zh"), ("zh-CN", "zh"), ("en", "en-us"), (" en-GB ", "en-gb"), ("j", "ja")],
)  # fmt: skip
def test_clients_spellings_fold_to_koes_codes(given: str, code: str) -> None:
    assert language(given).code == code


@pytest.mark.parametrize("given", ["ko", "klingon", "", "en-au", 7, None])
def test_an_unknown_language_is_an_error_listing_the_codes(given: object) -> None:
    with pytest.raises(ConfigError, match="lang must be") as raised:
        language(given)
    assert "ja" in raised.value.message and "pt-br" in raised.value.message


def test_a_voice_speaks_the_language_of_its_first_letter() -> None:
    assert of_voice("jf_alpha") == language("ja")
    assert of_voice("zm_yunxi") == language("zh")
    assert of_voice("pm_santa") == language("pt-br")
    assert of_voice("xx_unknown") is None
