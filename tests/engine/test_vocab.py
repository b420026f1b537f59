from __future__ import annotations

import json
from importlib.resources import files

import pytest

from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens, kokoro_config, tokenize, vocabulary
from koe.errors import SynthesisError


def test_vocabulary_matches_the_one_kokoro_onnx_ships() -> None:
    theirs = json.loads(files("kokoro_onnx").joinpath("config.json").read_text(encoding="utf-8"))
    assert vocabulary() == theirs["vocab"]
    assert len(vocabulary()) == 114
    assert kokoro_config()["n_token"] == 178


def test_symbols_outside_the_vocabulary_are_dropped() -> None:
    assert tokenize("hə❓lˈO") == tokenize("həlˈO")
    assert count_tokens("hə❓lˈO") == 5


def test_more_than_the_window_is_an_error_not_a_truncation() -> None:
    with pytest.raises(SynthesisError, match=f"at most {MAX_PHONEME_TOKENS}"):
        tokenize("a" * (MAX_PHONEME_TOKENS + 1))
    assert len(tokenize("a" * MAX_PHONEME_TOKENS)) == MAX_PHONEME_TOKENS
