"""espeak-ng through misaki's Kokoro mapping: Spanish, French, Hindi, Italian, Brazilian Portuguese.

``espeakng-loader`` bundles libespeak-ng and its data for all of them, so nothing is fetched. misaki's
``EspeakG2P`` turns espeak's IPA into Kokoro's symbols (the ``ʧ``/``ʤ``/diphthong letters it was trained
on). espeak reads numbers, percentages and most symbols in each language itself; what it misreads is
rewritten upstream (:mod:`koe.text.languages`).

Word timings need to know which phonemes belong to which word. espeak reads a whole text at once
(French liaison, Spanish linking need the neighbours), and its words usually match the text's one for
one; where they do not (a number read as several words) each word is read alone to count its words,
and failing that the text is timed as one word.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from koe.engine.timing import WordSpan
from koe.errors import AssetError, SynthesisError
from koe.g2p.symbols import keep_known

#: koe's code → espeak-ng's voice, as Kokoro's own pipeline uses them.
ESPEAK_VOICES = {"es": "es", "fr": "fr-fr", "hi": "hi", "it": "it", "pt-br": "pt-br"}
#: Marks espeak passes through that Kokoro does not speak: the Spanish opening ¿ ¡ carry no sound (the
#: closing ? ! give the intonation).
_SILENT = str.maketrans("", "", "¿¡")
#: The Hindi danda ends a sentence as a period does; espeak would drop it and run sentences together.
_DANDA = str.maketrans({"।": ".", "॥": "."})
#: phonemizer splits its input at these marks even inside a word ("1.234" loses "234 gatos" after it);
#: one between two word characters is no punctuation to keep, so it becomes a space (same offsets).
_INNER_MARK = re.compile(r"(?<=\w)[;:,.!?¡¿—…](?=\w)")
_WORD = re.compile(r"\S+")
#: A word's sounds: letters, digits and the combining vowel signs of Devanagari (not "\w" in Python).
_LETTERS = re.compile(r"[^\W_]|[\u0900-\u0903\u093a-\u094f\u0955-\u0957\u0962\u0963]")
#: What is trimmed off a word's phonemes to time only its sounds.
_PUNCTUATION = '!"(),.:;?—…“”«» '


def _backend(voice: str) -> Any:
    try:
        from misaki.espeak import EspeakG2P
    except ModuleNotFoundError as exc:
        raise AssetError(
            f"espeak-ng G2P needs {exc.name}: `pip install misaki==0.9.4 phonemizer==3.4.0 "
            "espeakng-loader==0.2.4`",
            code="language_unavailable",
        ) from exc
    return EspeakG2P(language=voice)


class EspeakG2P:
    """One espeak-ng language; calls are serialized (each instance holds its own copy of the library)."""

    def __init__(self, lang: str) -> None:
        if lang not in ESPEAK_VOICES:
            raise ValueError(f"espeak-ng G2P speaks {', '.join(ESPEAK_VOICES)}, not {lang!r}")
        self.lang = lang
        self._g2p = _backend(ESPEAK_VOICES[lang])
        self._lock = threading.Lock()

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """Phonemes with single spaces between espeak's words, and each written word's span in them."""
        text = _INNER_MARK.sub(" ", text.translate(_DANDA))
        phonemes = self._read(text)
        if not phonemes:
            return "", []
        tokens = list(_WORD.finditer(text))
        said = phonemes.split(" ")
        counts = [1] * len(tokens)
        if len(said) != len(tokens):
            counts = [len(self._read(token.group()).split()) for token in tokens]
        if sum(counts) != len(said):
            return phonemes, _whole(text, phonemes)
        return phonemes, _spans(tokens, said, counts)

    def _read(self, text: str) -> str:
        with self._lock:
            try:
                phonemes, _ = self._g2p(text)
            except Exception as exc:  # phonemizer raises assorted errors on odd input
                raise SynthesisError(f"{self.lang} G2P failed: {exc}") from exc
        phonemes = " ".join(phonemes.translate(_SILENT).split())
        return keep_known(phonemes, self.lang, text)


def _spans(tokens: list[re.Match[str]], said: list[str], counts: list[int]) -> list[WordSpan]:
    """Each written word over the ``count`` spoken words it became, in order (punctuation is no word)."""
    starts = [0]
    for piece in said:
        starts.append(starts[-1] + len(piece) + 1)
    spans: list[WordSpan] = []
    index = 0
    for token, count in zip(tokens, counts, strict=True):
        letters = [m.start() for m in _LETTERS.finditer(token.group())]
        if count and letters:
            span = _trimmed(" ".join(said[index : index + count]), starts[index])
            if span is not None:
                a, b = span
                spans.append(WordSpan(token.start() + letters[0], token.start() + letters[-1] + 1, a, b))
        index += count
    return spans


def _trimmed(phonemes: str, offset: int) -> tuple[int, int] | None:
    """Where ``phonemes`` (placed at ``offset``) has sounds, without the punctuation around them."""
    lead = len(phonemes) - len(phonemes.lstrip(_PUNCTUATION))
    end = len(phonemes.rstrip(_PUNCTUATION))
    return (offset + lead, offset + end) if end > lead else None


def _whole(text: str, phonemes: str) -> list[WordSpan]:
    """The whole text as one timed word (espeak's words could not be matched to the text's)."""
    letters = [m.start() for m in _LETTERS.finditer(text)]
    span = _trimmed(phonemes, 0)
    if not letters or span is None:
        return []
    return [WordSpan(letters[0], letters[-1] + 1, *span)]
