"""Phonemes read from a table the real G2P wrote beforehand: G2P for a machine that cannot carry one.

The GPU kit (:mod:`koe_bench.gpukit`) must fit in two 60 MiB carries, and spaCy with misaki's lexicons does
not; its benchmark speaks a few fixed texts. So the kit's builder reads each text once with koe's own G2P
(:func:`build_table`), and on the GPU machine :class:`TableG2P` answers for any stretch of those texts: the
slice of the whole text's phonemes that its words cover. A segment is therefore said exactly as it is in
its text's context (misaki reads a word by its neighbours), and a text the table does not hold is refused
(``AssetError``, ``phonemes_not_in_table``) rather than read wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from koe.engine.timing import WordSpan
from koe.errors import AssetError, ConfigError
from koe.g2p.base import G2P

SCHEMA = "koe-phoneme-table/1"
#: The largest table read: the benchmark's few texts take a few kB.
MAX_TABLE_BYTES = 2**22


@dataclass(frozen=True, slots=True)
class Reading:
    """One text as the real G2P read it: its phonemes and where each word is in them."""

    text: str
    phonemes: str
    words: tuple[WordSpan, ...]


def build_table(readers: Mapping[str, G2P], texts: Iterable[str]) -> dict[str, object]:
    """Every text read by each language's real G2P, as the JSON object :func:`load_table` reads."""
    kept = list(dict.fromkeys(texts))
    langs: dict[str, list[dict[str, object]]] = {}
    for lang, reader in readers.items():
        rows: list[dict[str, object]] = []
        for text in kept:
            phonemes, words = reader.phonemize_words(text)
            spans = [[w.text_start, w.text_end, w.phoneme_start, w.phoneme_end] for w in words]
            rows.append({"text": text, "phonemes": phonemes, "words": spans})
        langs[lang] = rows
    return {"schema": SCHEMA, "langs": langs}


def load_table(path: Path) -> dict[str, TableG2P]:
    """The table at ``path``, one :class:`TableG2P` per language it holds.

    Raises:
        ConfigError: the file is too large, not JSON, or not a table (``invalid_phoneme_table``).
    """
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise ConfigError(f"phoneme table {path}: larger than {MAX_TABLE_BYTES} bytes",
                              code="invalid_phoneme_table")  # fmt: skip
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"phoneme table {path}: cannot be read as JSON ({exc})",
                          code="invalid_phoneme_table") from exc  # fmt: skip
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("langs"), dict):
        raise ConfigError(f"phoneme table {path}: expected schema {SCHEMA} with langs",
                          code="invalid_phoneme_table")  # fmt: skip
    try:
        return {lang: TableG2P(lang, [_reading(row) for row in rows]) for lang, rows in data["langs"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"phoneme table {path}: a row is not text, phonemes and word spans ({exc})",
                          code="invalid_phoneme_table") from exc  # fmt: skip


def _reading(row: Mapping[str, object]) -> Reading:
    text, phonemes, spans = row["text"], row["phonemes"], row["words"]
    if not isinstance(text, str) or not isinstance(phonemes, str) or not isinstance(spans, list):
        raise TypeError("text and phonemes must be strings, words a list")
    words = tuple(WordSpan(*(int(v) for v in span)) for span in spans)
    for w in words:
        if not (0 <= w.text_start <= w.text_end <= len(text) and 0 <= w.phoneme_start <= w.phoneme_end
                <= len(phonemes)):  # fmt: skip
            raise ValueError("a word span lies outside its text or phonemes")
    return Reading(text, phonemes, words)


def _collapsed(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of whitespace as one space, and where each kept character was in ``text``."""
    chars: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        if char.isspace():
            if chars and chars[-1] == " ":
                continue
            char = " "
        chars.append(char)
        origin.append(i)
    return "".join(chars), origin


class TableG2P:
    """One language's readings; :meth:`phonemize_words` answers for any stretch of them. Thread-safe (it
    only reads)."""

    def __init__(self, lang: str, readings: list[Reading]) -> None:
        self.lang = lang
        self._readings = [(reading, *_collapsed(reading.text)) for reading in readings]

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """The phonemes the whole text's reading gives ``text``'s words, and where they are.

        Raises:
            AssetError: no reading holds ``text`` (``phonemes_not_in_table``); the message omits the text.
        """
        query, query_origin = _collapsed(text.strip())
        offset = len(text) - len(text.lstrip())
        if not query:
            return "", []
        for reading, collapsed, origin in self._readings:
            start = collapsed.find(query)
            while start >= 0 and start > 0 and collapsed[start - 1].isalnum():
                start = collapsed.find(query, start + 1)
            if start < 0:
                continue
            first, end = origin[start], origin[start + len(query) - 1] + 1
            inside = [w for w in reading.words if first <= w.text_start and w.text_end <= end]
            if not inside:
                return "", []
            position = {at: k for k, at in enumerate(origin)}
            base = inside[0].phoneme_start
            stop = inside[-1].phoneme_end
            if end > inside[-1].text_end:  # punctuation after the last word: what the reading said for it
                later = [w.phoneme_start for w in reading.words if w.text_start >= end]
                stop = len(reading.phonemes[: later[0] if later else len(reading.phonemes)].rstrip())
            phonemes = reading.phonemes[base:stop]
            spans = [
                WordSpan(
                    query_origin[position[w.text_start] - start] + offset,
                    query_origin[position[w.text_end - 1] - start] + 1 + offset,
                    w.phoneme_start - base,
                    w.phoneme_end - base,
                )
                for w in inside
            ]
            return phonemes, spans
        raise AssetError(
            f"the phoneme table ({self.lang}) holds no reading of this {len(text)}-character text: "
            "the kit was built for other texts (make gpu-kit)",
            code="phonemes_not_in_table",
        )
