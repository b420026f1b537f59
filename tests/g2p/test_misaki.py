from __future__ import annotations

import pytest
import spacy.cli

from koe.g2p.misaki import MisakiG2P


def test_g2p_is_built_without_any_download(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("G2P tried to download a spaCy model")

    monkeypatch.setattr(spacy.cli, "download", refuse)
    g2p = MisakiG2P(british=True)
    assert g2p.lang == "en-gb"
    assert g2p.phonemize("Hello there.") == "həlˈQ ðˈɛː."


def test_out_of_vocabulary_words_are_read_by_the_espeak_fallback() -> None:
    phonemes = MisakiG2P().phonemize("Zorblaxian")
    assert phonemes.strip() and "❓" not in phonemes


def test_american_and_british_accents_differ() -> None:
    assert MisakiG2P().phonemize("tomato") != MisakiG2P(british=True).phonemize("tomato")
