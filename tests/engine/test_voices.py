from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from koe.engine.voices import MAX_BLEND_COMPONENTS, VOICES, VoiceBank, VoiceInfo, describe, parse_blend
from koe.errors import VoiceError


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("af_heart", [("af_heart", 1.0)]),
        ("af_bella(2)+af_sky(1)", [("af_bella", 2 / 3), ("af_sky", 1 / 3)]),
        ("af_bella + af_sky", [("af_bella", 0.5), ("af_sky", 0.5)]),
        ("am_adam(0.25)+bm_george(0.75)", [("am_adam", 0.25), ("bm_george", 0.75)]),
    ],
)
def test_blend_syntax_parses_to_normalized_weights(spec: str, expected: list[tuple[str, float]]) -> None:
    parsed = parse_blend(spec)
    assert [name for name, _ in parsed] == [name for name, _ in expected]
    assert [weight for _, weight in parsed] == pytest.approx([weight for _, weight in expected])


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "   ",
        "af_bella(",
        "af_bella(0)",
        "af_bella(-1)+af_sky",
        "af_bella()+af_sky",
        "af_bella(2)af_sky",
        "af_bella++af_sky",
        "../../etc/passwd",
        "af_heart/../../secret",
        "/tmp/af_heart",
        "AF_HEART",
        "x" * 500,
        "+".join(["af_sky"] * (MAX_BLEND_COMPONENTS + 1)),
    ],
)
def test_malformed_or_path_like_specs_are_refused(spec: str) -> None:
    with pytest.raises(VoiceError):
        parse_blend(spec)


def test_non_string_spec_is_refused() -> None:
    with pytest.raises(VoiceError, match="non-empty string"):
        parse_blend(42)  # type: ignore[arg-type]


def test_unknown_voice_lists_the_valid_ones(voice_bank: VoiceBank) -> None:
    with pytest.raises(VoiceError) as caught:
        voice_bank.resolve("af_nobody")
    assert "af_nobody" in caught.value.message
    assert "af_heart" in caught.value.message and "bm_lewis" in caught.value.message


@pytest.mark.parametrize("spec", ["no_such_voice", "Magpie-Multilingual.EN-US.Aria", "AF_HEART", "nova"])
def test_a_plain_name_outside_kokoros_syntax_is_an_unknown_voice_too(
    voice_bank: VoiceBank, spec: str
) -> None:
    with pytest.raises(VoiceError) as caught:
        voice_bank.resolve(spec)
    assert caught.value.message.startswith(f"unknown voice {spec!r}; valid voices: af_alloy")


def test_a_malformed_blend_is_still_called_malformed(voice_bank: VoiceBank) -> None:
    with pytest.raises(VoiceError, match="malformed"):
        voice_bank.resolve("af_bella(2)af_sky")


def test_blend_is_the_weighted_average_of_tables(voice_bank: VoiceBank) -> None:
    bella, sky = voice_bank.resolve("af_bella"), voice_bank.resolve("af_sky")
    blend = voice_bank.resolve("af_bella(2)+af_sky(1)")
    assert blend.shape == (510, 1, 256) and blend.dtype == np.float32
    np.testing.assert_allclose(blend, (2 * bella + sky) / 3, rtol=1e-5, atol=1e-6)


def test_bank_holds_all_54_voices_with_language_and_gender(voice_bank: VoiceBank) -> None:
    assert voice_bank.names() == sorted(VOICES) and len(VOICES) == 54
    assert describe("bf_emma").lang == "en-gb" and describe("bf_emma").gender == "female"
    assert describe("am_onyx").lang == "en-us" and describe("am_onyx").gender == "male"
    assert describe("jf_alpha") == VoiceInfo("jf_alpha", "ja", "Japanese", "female")
    assert describe("zm_yunxi") == VoiceInfo("zm_yunxi", "zh", "Mandarin Chinese", "male")
    assert describe("pm_santa").lang == "pt-br" and describe("hf_beta").lang == "hi"
    counts = Counter(info.lang for info in voice_bank.info())
    assert counts == {
        "en-us": 20,
        "en-gb": 8,
        "es": 3,
        "fr": 1,
        "hi": 4,
        "it": 2,
        "ja": 5,
        "pt-br": 3,
        "zh": 8,
    }
    assert voice_bank.lang_of("bm_george(3)+af_sky") == "en-gb"  # one language: the first voice's accent
    assert voice_bank.lang_of("jf_alpha(2)+jm_kumo") == "ja"


def test_a_blend_of_two_languages_is_an_error_naming_them() -> None:
    with pytest.raises(VoiceError) as caught:
        parse_blend("jf_alpha+ef_dora")
    message = caught.value.message
    assert "one language" in message and "jf_alpha (Japanese)" in message and "ef_dora (Spanish)" in message
    assert [name for name, _ in parse_blend("ef_dora(1)+em_alex(3)")] == ["ef_dora", "em_alex"]


def test_the_other_languages_voices_are_verified_like_the_english_ones(installed_voices: Path) -> None:
    bank = VoiceBank.load(installed_voices, ("jf_alpha", "zf_xiaobei", "hm_omega"))
    assert bank.resolve("jf_alpha").shape == (510, 1, 256)
