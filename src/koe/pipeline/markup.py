"""Pronunciation markup checked against the loaded model: what :mod:`koe.text.markup` parses, with every
phoneme symbol in Kokoro's vocabulary.

A symbol the model lacks would be dropped by its tokenizer without a word, and the caller would hear a
word with a sound missing; the caller wrote these phonemes on purpose, so it gets an error naming the
symbol instead.
"""

from __future__ import annotations

from koe.errors import ConfigError
from koe.g2p.symbols import unknown_symbols
from koe.text.languages.scripts import check_script
from koe.text.markup import INVALID_MARKUP, PhonemeRun, Run, runs
from koe.text.ssml import PLAIN, is_ssml, read


def checked_runs(text: str) -> list[Run]:
    """``text``'s runs (:func:`koe.text.markup.runs`), every phoneme run's symbols known to the model.

    Raises:
        ConfigError: ``invalid_markup``: malformed markup, or a phoneme symbol outside the vocabulary.
    """
    parsed = runs(text)
    for run in parsed:
        if isinstance(run, PhonemeRun):
            unknown = unknown_symbols(run.phonemes)
            if unknown:
                named = ", ".join(f"{symbol!r} (U+{ord(symbol):04X})" for symbol in unknown)
                raise ConfigError(
                    f"expected phonemes in Kokoro's alphabet (docs/pronunciation.md), got {named} in "
                    f"the phonemes of {text[run.start : run.end]!r}",
                    code=INVALID_MARKUP,
                )
    return parsed


def check_text(text: str, lang: str) -> None:
    """Refuse a whole text that cannot be spoken as written, before any of it is synthesized (the routes that
    take the whole text; a stream's segments are checked one by one, where they are decoded): its markup
    cannot be honoured, or it holds a script its language cannot read. A text that starts with ``<speak`` is
    SSML (:mod:`koe.text.ssml`), checked as what it reads as, each ``<lang>`` span in its own language.

    Raises:
        ConfigError: ``invalid_markup``: malformed SSML, or as :func:`checked_runs`;
            ``unsupported_script``: see :func:`koe.text.languages.scripts.check_script`.
    """
    parts = read(text).parts() if is_ssml(text) else [(text, PLAIN)]
    for part, style in parts:
        check_script(part, style.lang or lang)
        checked_runs(part)
