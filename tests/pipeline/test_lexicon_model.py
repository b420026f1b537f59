"""Lexicons with the real model: a word the lexicon holds gets its phonemes from the real G2P's text, a TSV
file gives what the same JSON gives, and a respelled word is said as the language's G2P reads the
respelling, its timing spanning the word as written."""

from __future__ import annotations

import json
from pathlib import Path

from koe.pipeline.lexicon import load_lexicon
from koe.pipeline.speech import Speech

#: A name G2P says otherwise ("nˈujɛn"), respelled; and a word given phonemes.
ENTRIES = {"en-us": {"koe": "kˈOA", "Nguyen": "=win"}}
TSV = "# language\tword\tvalue\nen-us\tkoe\tkˈOA\nen-us\tNguyen\t=win\n"
TEXT = "Please call Nguyen about koe today."


def _with_lexicon(speech: Speech, path: Path) -> Speech:
    return Speech(speech.engine, speech.voices, speech.g2p, lexicon=load_lexicon(path))


def _json(tmp_path: Path, entries: object = ENTRIES) -> Path:
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def test_a_lexicon_word_is_said_with_its_phonemes_by_the_real_g2p(speech: Speech, tmp_path: Path) -> None:
    with_lexicon = _with_lexicon(speech, _json(tmp_path, {"en-us": {"koe": "kˈOA"}}))
    assert with_lexicon.phonemize("Koe's voice is clear.") == ["kˈOAz vˈYs ɪz klˈɪɹ."]
    assert "kˈOA" not in speech.phonemize("Koe's voice is clear.")[0]


def test_a_tsv_lexicon_gives_the_phonemes_the_same_json_one_gives(speech: Speech, tmp_path: Path) -> None:
    tsv = tmp_path / "lexicon.tsv"
    tsv.write_text(TSV, encoding="utf-8")
    said = _with_lexicon(speech, tsv).phonemize(TEXT)
    assert said == _with_lexicon(speech, _json(tmp_path)).phonemize(TEXT)
    assert said != speech.phonemize(TEXT)


def test_a_respelled_word_is_said_as_the_g2p_reads_the_respelling_and_timed_as_the_word_written(
    speech: Speech, tmp_path: Path
) -> None:
    with_lexicon = _with_lexicon(speech, _json(tmp_path))
    (respelled,) = speech.phonemize("win")
    (plain,) = speech.phonemize(TEXT)
    (said,) = with_lexicon.phonemize(TEXT)
    assert f" {respelled} " in said and respelled not in plain
    decode = with_lexicon.decode(TEXT, with_lexicon.voice("af_heart"))
    words = decode.open()
    decode.next_audio()
    written = (TEXT.index("Nguyen"), TEXT.index("Nguyen") + len("Nguyen"))
    (name,) = [w for w in words if (w.text_start, w.text_end) == written]
    assert name.end_s > name.start_s
    assert [TEXT[w.text_start : w.text_end] for w in words] == [
        "Please", "call", "Nguyen", "about", "koe", "today"
    ]  # fmt: skip


def test_a_caller_s_respelling_is_read_by_the_real_g2p(speech: Speech) -> None:
    voice = speech.voice("af_heart", lexicon={"*": {"Nguyen": "=win"}})
    (piece,) = speech.phonemize_words("Call Nguyen.", voice.lang, lexicon=voice.lexicon)
    assert piece.phonemes == f"kˈɔl {speech.phonemize('win')[0]}."
