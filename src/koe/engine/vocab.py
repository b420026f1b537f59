"""Phoneme symbols → model token ids, with Kokoro's 114-symbol vocabulary (from the model's config.json)."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files

from koe.errors import SynthesisError

#: The model's context: 512 positions, two of them the padding tokens around the phonemes.
MAX_PHONEME_TOKENS = 510


@cache
def kokoro_config() -> dict[str, object]:
    """Kokoro-82M's ``config.json`` (architecture and vocabulary), shipped inside koe."""
    text = files("koe.engine").joinpath("kokoro_config.json").read_text(encoding="utf-8")
    config: dict[str, object] = json.loads(text)
    return config


@cache
def vocabulary() -> dict[str, int]:
    vocab = kokoro_config()["vocab"]
    assert isinstance(vocab, dict)  # our own packaged file, not outside input
    return {str(symbol): int(index) for symbol, index in vocab.items()}


def count_tokens(phonemes: str) -> int:
    """How many model tokens a phoneme string becomes (symbols outside the vocabulary are dropped)."""
    vocab = vocabulary()
    return sum(1 for symbol in phonemes if symbol in vocab)


def tokenize(phonemes: str) -> list[int]:
    """Map phonemes to ids; raises ``SynthesisError`` past the model's window instead of truncating."""
    vocab = vocabulary()
    ids = [vocab[symbol] for symbol in phonemes if symbol in vocab]
    if len(ids) > MAX_PHONEME_TOKENS:
        raise SynthesisError(
            f"phoneme string has {len(ids)} tokens; the model takes at most {MAX_PHONEME_TOKENS} "
            "(split it with koe.g2p.chunk.split_phonemes first)"
        )
    return ids
