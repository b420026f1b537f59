"""Each language's G2P, built at load (the languages a caller names) or on first use.

Building takes up to seconds (misaki's English lexicon and spaCy, OpenJTalk's dictionary, jieba's prefix
dictionary), so a G2P is built once, by whichever thread needs it first, while others needing the same one
wait for it; :meth:`G2PRegistry.prepare` starts a build in the background as soon as a turn's language is
known. A language whose optional dependency is missing fails with ``AssetError`` (``language_unavailable``)
naming the command that installs it, and :meth:`G2PRegistry.check` says so without building anything.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Callable, Mapping

from koe.errors import AssetError, ConfigError
from koe.g2p.base import G2P
from koe.g2p.espeak import ESPEAK_VOICES, EspeakG2P
from koe.g2p.japanese import INSTALL as JAPANESE_INSTALL
from koe.g2p.japanese import JapaneseG2P
from koe.g2p.mandarin import INSTALL as MANDARIN_INSTALL
from koe.g2p.mandarin import MandarinG2P
from koe.g2p.misaki import MisakiG2P
from koe.languages import CODES

logger = logging.getLogger(__name__)

Builder = Callable[["G2PRegistry"], G2P]
#: The modules each language's G2P imports, and the command that installs them.
_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "ja": (("pyopenjtalk", "jaconv", "fugashi", "mojimoji"), JAPANESE_INSTALL),
    "zh": (("jieba", "pypinyin", "cn2an", "ordered_set"), MANDARIN_INSTALL),
}


def _builders() -> dict[str, Builder]:
    """koe's G2P for every language; Japanese and Mandarin read Latin words with American English."""
    builders: dict[str, Builder] = {
        "en-us": lambda registry: MisakiG2P(british=False),
        "en-gb": lambda registry: MisakiG2P(british=True),
        "ja": lambda registry: JapaneseG2P(english=registry.english),
        "zh": lambda registry: MandarinG2P(english=registry.english),
    }
    for lang in ESPEAK_VOICES:
        builders[lang] = lambda registry, lang=lang: EspeakG2P(lang)  # type: ignore[misc]
    return builders


def _missing(lang: str) -> list[str]:
    """The modules ``lang``'s G2P imports that are not installed."""
    return [module for module in _NEEDS.get(lang, ((), ""))[0] if importlib.util.find_spec(module) is None]


def _given(g2p: G2P) -> Builder:
    return lambda registry: g2p


class G2PRegistry:
    """Lazily built G2P by language code; thread-safe."""

    def __init__(self, builders: Mapping[str, Builder] | None = None) -> None:
        self._builders = dict(_builders() if builders is None else builders)
        self._built: dict[str, G2P] = {}
        self._locks = {lang: threading.Lock() for lang in self._builders}
        self._preparing: set[str] = set()
        self._preparing_lock = threading.Lock()

    @classmethod
    def of(cls, g2p: Mapping[str, G2P]) -> G2PRegistry:
        """A registry of G2P already built (tests, a fake engine)."""
        registry = cls({lang: _given(made) for lang, made in g2p.items()})
        registry._built.update(g2p)
        return registry

    @property
    def langs(self) -> tuple[str, ...]:
        """The languages this registry can read, in koe's order."""
        return tuple(lang for lang in CODES if lang in self._builders)

    def built(self) -> tuple[str, ...]:
        """The languages whose G2P is built so far."""
        return tuple(self._built)

    def check(self, lang: str) -> None:
        """Raise what :meth:`get` would for a language this registry cannot build, without building it.

        Raises:
            ConfigError: not a language of this registry. AssetError: its dependency is not installed.
        """
        if lang not in self._builders:
            raise ConfigError(f"lang {lang} has no G2P here; available: {', '.join(self.langs)}")
        if lang in self._built:
            return
        missing = _missing(lang)
        if missing:
            command = _NEEDS[lang][1]
            raise AssetError(
                f"lang {lang} needs {', '.join(missing)}, which is not installed: `{command}`",
                code="language_unavailable",
            )

    def installed(self) -> tuple[str, ...]:
        """The languages whose G2P can be built here (built or not): those whose dependency is installed."""
        return tuple(lang for lang in self.langs if lang in self._built or not _missing(lang))

    def get(self, lang: str) -> G2P:
        """The G2P of ``lang``, built now if it is the first use (blocks for seconds then).

        Raises:
            ConfigError: not a language of this registry. AssetError: a dependency is missing.
        """
        built = self._built.get(lang)
        if built is not None:
            return built
        self.check(lang)
        with self._locks[lang]:
            built = self._built.get(lang)
            if built is None:
                started = time.perf_counter()
                built = self._builders[lang](self)
                self._built[lang] = built
                logger.info("%s G2P built in %.1f s", lang, time.perf_counter() - started)
        return built

    def english(self) -> G2P:
        """The reader of Latin-script words inside Japanese and Mandarin text."""
        return self.get("en-us")

    def prepare(self, lang: str) -> None:
        """Build ``lang``'s G2P in a background thread if it is not built (returns at once)."""
        with self._preparing_lock:
            if lang in self._built or lang not in self._builders or lang in self._preparing:
                return
            self._preparing.add(lang)
        threading.Thread(
            target=self._build_quietly, args=(lang,), name=f"koe-g2p-{lang}", daemon=True
        ).start()

    def _build_quietly(self, lang: str) -> None:
        try:
            self.get(lang)
        except Exception:  # the turn that needs it reports the error; here it is only logged
            logger.warning("building the %s G2P in the background failed", lang, exc_info=True)
