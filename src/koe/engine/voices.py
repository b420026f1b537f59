"""Voices: Kokoro's per-voice style tables, their language and gender, and weighted blends.

A voice spec is a name (``af_heart``) or a blend (``af_bella(2)+af_sky(1)``, weights default to 1). Names
are checked against a strict pattern and the loaded set, so a spec can never reach the filesystem as a path.
A voice's first letter is its language (:mod:`koe.languages`); a blend mixes voices of one language only
(American and British English count as one), since each language's voices were trained on its phonemes.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from koe.engine.assets import VOICE_SUFFIX, pinned_voice_hashes, verify
from koe.errors import AssetError, VoiceError
from koe.languages import DEFAULT, Language, language, of_voice
from koe.types import StyleTable

logger = logging.getLogger(__name__)

#: Rows × style width of every Kokoro voice table.
STYLE_ROWS, STYLE_WIDTH = 510, 256
_VOICE_BYTES = STYLE_ROWS * STYLE_WIDTH * 4
_NAME = re.compile(r"[a-z]{2}_[a-z0-9]{1,32}")
_COMPONENT = re.compile(r"(?P<name>[a-z]{2}_[a-z0-9]{1,32})(?:\((?P<weight>[0-9]+(?:\.[0-9]+)?)\))?")
MAX_BLEND_COMPONENTS = 8
MAX_SPEC_LENGTH = 200
#: A spec outside Kokoro's name syntax that still reads as one voice's name (``no_such_voice``, ``Aria``).
_PLAIN_NAME = re.compile(r"[\w.-]{1,100}")
_MAX_CACHED_BLENDS = 64  # distinct blends kept resolved; bounded so clients cannot grow memory

AMERICAN = "en-us"
BRITISH = "en-gb"
_GENDER_BY_LETTER = {"f": "female", "m": "male"}

ENGLISH_VOICES = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova",
    "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael",
    "am_onyx", "am_puck", "am_santa", "bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel",
    "bm_fable", "bm_george", "bm_lewis",
)  # fmt: skip
#: The other 26 voices of the same kokoro-js 1.2.1 tarball, by language.
OTHER_VOICES = (
    "ef_dora", "em_alex", "em_santa",
    "ff_siwis",
    "hf_alpha", "hf_beta", "hm_omega", "hm_psi",
    "if_sara", "im_nicola",
    "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo",
    "pf_dora", "pm_alex", "pm_santa",
    "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi",
    "zm_yunjian", "zm_yunxi", "zm_yunxia", "zm_yunyang",
)  # fmt: skip
#: Every voice koe installs: all 54 of kokoro-js 1.2.1.
VOICES = ENGLISH_VOICES + OTHER_VOICES
DEFAULT_VOICE = "af_heart"


@dataclass(frozen=True, slots=True)
class VoiceInfo:
    """A voice's listing: ``lang`` is koe's code, ``language`` its English name."""

    name: str
    lang: str
    language: str
    gender: str


def language_of(name: str) -> Language:
    """The language a voice name speaks (American English for a name of no Kokoro language: a local
    voice file named by its owner)."""
    return of_voice(name) or DEFAULT


def _read_table(directory: Path, name: str, pinned: str | None) -> StyleTable:
    """One voice's style table from ``<directory>/<name>.bin``, verified against ``pinned`` if given."""
    path = directory / f"{name}{VOICE_SUFFIX}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AssetError(f"voice {name} is missing at {path}: run `koe install`") from exc
    if pinned is not None:
        verify(data, pinned, f"voice {name} ({path})")
    if len(data) != _VOICE_BYTES:
        raise AssetError(f"voice {path} has {len(data)} bytes; a Kokoro voice has {_VOICE_BYTES}")
    return np.frombuffer(data, dtype="<f4").reshape(STYLE_ROWS, 1, STYLE_WIDTH).copy()


def describe(name: str) -> VoiceInfo:
    language = language_of(name)
    return VoiceInfo(name, language.code, language.name, _GENDER_BY_LETTER.get(name[1:2], "unknown"))


def parse_blend(spec: str) -> list[tuple[str, float]]:
    """Split ``a(2)+b(1)`` into normalized ``[(a, 2/3), (b, 1/3)]``; raises ``VoiceError`` on bad syntax."""
    if not isinstance(spec, str) or not spec.strip():
        raise VoiceError(f"voice must be a non-empty string like '{DEFAULT_VOICE}', got {spec!r}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise VoiceError(f"voice spec is {len(spec)} characters; at most {MAX_SPEC_LENGTH} are allowed")
    parts = spec.replace(" ", "").split("+")
    if len(parts) > MAX_BLEND_COMPONENTS:
        raise VoiceError(f"a blend takes at most {MAX_BLEND_COMPONENTS} voices, got {len(parts)}")
    components: list[tuple[str, float]] = []
    for part in parts:
        match = _COMPONENT.fullmatch(part)
        if match is None:
            raise VoiceError(
                f"malformed voice {part!r} in {spec!r}: expected a name like 'af_bella' or a blend like "
                "'af_bella(2)+af_sky(1)'"
            )
        weight = float(match["weight"] or 1.0)
        if not math.isfinite(weight) or weight <= 0:
            raise VoiceError(f"blend weights must be positive numbers, got {match['weight']!r} in {spec!r}")
        components.append((match["name"], weight))
    families = {language_of(name).family: language_of(name) for name, _ in components}
    if len(families) > 1:
        mixed = ", ".join(f"{name} ({language_of(name).name})" for name, _ in components)
        raise VoiceError(
            f"a blend mixes voices of one language; {spec!r} mixes {mixed}. Blend voices of the same "
            "language (same first letter), and set lang to change how the text is read",
            code="mixed_languages",
        )
    total = sum(weight for _, weight in components)
    return [(name, weight / total) for name, weight in components]


class VoiceBank:
    """Loaded style tables by name; resolves specs (names and blends) to one table.

    ``unavailable``: voices that were asked for but could not be loaded (a corrupt or missing file); a
    spec naming one is refused with that reason rather than as unknown.
    """

    def __init__(self, tables: Mapping[str, StyleTable], unavailable: Iterable[str] = ()) -> None:
        if not tables:
            raise AssetError("no voices loaded")
        self._tables = dict(tables)
        self.unavailable = tuple(sorted(unavailable))
        self._blends: dict[str, StyleTable] = {}

    @classmethod
    def load(
        cls, directory: Path, names: tuple[str, ...] | None = None, required: Iterable[str] = ()
    ) -> VoiceBank:
        """Load ``<name>.bin`` files (510×256 float32); voices koe pins a hash for are verified.

        A voice that fails to load is left out and logged, so one corrupt file does not take every other
        voice down with it — unless it is ``required`` (the default voice), or no voice loads at all.

        Raises:
            AssetError: a required voice, or every voice, failed to load.
        """
        pinned = pinned_voice_hashes()
        if names is None:
            names = tuple(
                sorted(p.name.removesuffix(VOICE_SUFFIX) for p in directory.glob(f"*{VOICE_SUFFIX}"))
            )
        tables: dict[str, StyleTable] = {}
        failed: dict[str, str] = {}
        for name in names:
            if not _NAME.fullmatch(name):
                continue  # not a voice (a stray file); names outside the pattern are unreachable
            try:
                tables[name] = _read_table(directory, name, pinned.get(name))
            except AssetError as exc:
                if name in required:
                    raise
                logger.error("voice %s is not served: %s", name, exc.message)
                failed[name] = exc.message
        if not tables and failed:
            first = next(iter(failed.values()))
            raise AssetError(f"no voice could be loaded ({len(failed)} failed), the first: {first}")
        return cls(tables, failed)

    def names(self) -> list[str]:
        return sorted(self._tables)

    def info(self) -> list[VoiceInfo]:
        return [describe(name) for name in self.names()]

    def lang_of(self, spec: str) -> str:
        """The language a spec speaks: its voices' (a blend's accent: its first-listed component's)."""
        return language_of(parse_blend(spec)[0][0]).code

    def resolve(self, spec: str) -> StyleTable:
        """The style table for a name or blend; raises ``VoiceError`` listing the valid names."""
        cached = self._blends.get(spec)
        if cached is not None:
            return cached
        try:
            components = parse_blend(spec)
        except VoiceError:
            if isinstance(spec, str) and _PLAIN_NAME.fullmatch(spec.strip()):
                raise self._unknown(spec.strip()) from None  # a name, just not one of ours
            raise
        unknown = [name for name, _ in components if name not in self._tables]
        if unknown and unknown[0] in self.unavailable:
            raise VoiceError(
                f"voice {unknown[0]} is unavailable on this server: its file failed to load (the server's "
                f"log says why); valid voices: {', '.join(self.names())}"
            )
        if unknown:
            raise self._unknown(unknown[0])
        if len(components) == 1:
            return self._tables[components[0][0]]
        weighted = [self._tables[name] * np.float32(weight) for name, weight in components]
        blended: StyleTable = np.sum(weighted, axis=0, dtype=np.float32)
        if len(self._blends) < _MAX_CACHED_BLENDS:
            self._blends[spec] = blended
        return blended

    def speaker_of(self, lang: str, like: str) -> str:
        """A loaded voice of the language ``lang`` for text in it (Kokoro's voices each speak one): the
        first of the gender of ``like`` (a blend: its first voice's), else the first.

        Raises:
            VoiceError: no voice of ``lang`` is loaded.
        """
        prefix = language(lang).prefix
        gender = parse_blend(like)[0][0][1:2]
        names = [name for name in self.names() if name[:1] == prefix]
        if not names:
            raise VoiceError(
                f"no voice speaks {language(lang).name} here; valid voices: {', '.join(self.names())}"
            )
        return next((name for name in names if name[1:2] == gender), names[0])

    def _unknown(self, name: str) -> VoiceError:
        return VoiceError(f"unknown voice {name!r}; valid voices: {', '.join(self.names())}")
