"""Japanese: readings from pyopenjtalk-plus, romanized by misaki's Kokoro romanizer — fully offline.

misaki's own Japanese path tags text with fugashi and ``unidic``, whose dictionary is downloaded at run
time. OpenJTalk (in ``pyopenjtalk-plus``, dictionary included) gives the same kind of readings — it also
reads numbers with their counters ("3本" → サンボン) and 円, %, dates — and misaki's romanizer
(``misaki.cutlet``, the phoneme style Kokoro's Japanese voices were trained on) turns them into
Kokoro's symbols. The romanizer is given each OpenJTalk word with its reading instead of a fugashi node.

Latin-script words are read by the English G2P when one is given (docs/languages.md): OpenJTalk spells
an English word letter by letter ("Python" → ピーワイティーエイチオーエヌ). Capitals-only words of up to
:data:`_MAX_ACRONYM` letters stay with OpenJTalk, which says them as a Japanese speaker does (AI →
エーアイ).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

from koe.engine.timing import WordSpan
from koe.errors import AssetError, SynthesisError
from koe.g2p.base import G2P
from koe.g2p.symbols import keep_known

#: pyopenjtalk-plus goes in without its dependencies: it would pull a 190 MB Sudachi dictionary that its
#: reading corrections need, and koe turns those off (the Makefile says the same).
INSTALL = (
    "pip install --no-deps pyopenjtalk-plus==0.4.1.post10 sudachipy==0.7.0 && "
    "pip install jaconv==0.5.0 mojimoji==0.0.13 fugashi==1.5.2"
)
_SYMBOL_POS = "記号"
_MAX_ACRONYM = 5
#: A run of Latin-script words: the spaces, apostrophes and hyphens inside it, and the ASCII punctuation
#: between and after its words (an English sentence is read as one, with its pauses).
_LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z'’-]*(?:[ \t,;:]*[ \t][A-Za-z][A-Za-z'’-]*)*[.,!?;:]*")
_ACRONYM = re.compile(rf"[A-Z]{{1,{_MAX_ACRONYM}}}")
#: The romanizer's spacing fix-up: no space before or after a glottal stop, unless punctuation is there.
_GLOTTAL_SPACE = re.compile(r'(?<![!",.:;?»—…”]) (?=ʔ)|(?<=ʔ) (?!["«“])')
#: Digits OpenJTalk leaves as digits (a lone "0" stays ０, read ゼロ), as the kanji digits of the same
#: length: misaki's romanizer refuses a word whose surface is digits (it expects its own number reader to
#: have run first), and it reads a word by its reading, which OpenJTalk gives, not by its surface.
_KANJI_DIGITS = str.maketrans("0123456789０１２３４５６７８９", "〇一二三四五六七八九" * 2)
#: How far past a word OpenJTalk rewrote ("3" → 三) the next word may be found in the text.
_REWRITE_REACH = 16
_PUNCTUATION = '!"(),.:;?—…“”«» '


def _modules() -> tuple[Any, Any, Any]:
    try:
        import jaconv
        import pyopenjtalk
        from misaki import cutlet
    except ModuleNotFoundError as exc:
        raise AssetError(f"Japanese G2P needs {exc.name}: `{INSTALL}`", code="language_unavailable") from exc
    return pyopenjtalk, jaconv, cutlet


class JapaneseG2P:
    """Japanese text → Kokoro phonemes, each OpenJTalk word (or dictionary compound) a timed word."""

    lang = "ja"

    def __init__(self, english: Callable[[], G2P] | None = None) -> None:
        self._openjtalk, self._jaconv, cutlet = _modules()
        self._romanizer = _romanizer(cutlet)
        self._english = english
        self._lock = threading.Lock()

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        """Phonemes and word spans; Latin runs go to the English G2P (when given), the rest to OpenJTalk."""
        pieces: list[tuple[str, list[WordSpan]]] = []
        offsets: list[int] = []
        for start, end, english in _runs(text, self._english is not None):
            if not text[start:end].strip():
                continue
            if english:
                assert self._english is not None  # runs are English only when it is given
                pieces.append(self._english().phonemize_words(text[start:end]))
            else:
                pieces.append(self._japanese(text[start:end]))
            offsets.append(start)
        return _joined(pieces, offsets)

    def _japanese(self, text: str) -> tuple[str, list[WordSpan]]:
        with self._lock:
            try:
                nodes = self._openjtalk.run_frontend(text, use_sudachi_kanji_yomi=False)
                words = [self._word(node) for node in nodes]
                tokens, groups = self._romanizer.tokens(words)
            except Exception as exc:  # OpenJTalk and the romanizer raise assorted errors on odd input
                raise SynthesisError(f"Japanese G2P failed: {exc}") from exc
        surfaces = [str(node["string"]) for node in nodes]
        node_spans = _align(text, surfaces)
        phonemes, token_spans = _assemble(tokens)
        spans: list[WordSpan] = []
        first = 0
        for group, phoneme_span in zip(groups, token_spans, strict=True):
            located = [span for span in node_spans[first : first + group] if span is not None]
            first += group
            if phoneme_span is not None and located:
                spans.append(WordSpan(located[0][0], located[-1][1], *phoneme_span))
        return keep_known(phonemes, self.lang, text), spans

    def _word(self, node: dict[str, Any]) -> Any:
        """An OpenJTalk word as the romanizer's word: its surface and its reading in hiragana."""
        surface = str(node["string"])
        reading = (
            surface if node["pos"] == _SYMBOL_POS else str(node["pron"]).replace("’", "").replace("'", "")
        )
        return self._romanizer.word(surface.translate(_KANJI_DIGITS), self._jaconv.kata2hira(reading))


def _romanizer(cutlet: Any) -> Any:
    """misaki's romanizer without its fugashi tagger, reporting how many words each token is made of."""

    class Romanizer(cutlet.Cutlet):  # type: ignore[misc]  # misaki is untyped
        def __init__(self) -> None:
            self.table = dict(cutlet.HEPBURN)
            self.exceptions: dict[str, str] = {}
            self._surfaces: list[str] = []

        def word(self, surface: str, hira: str) -> Any:
            return cutlet.Word(surface, hira, _KANA_TYPE)

        def _romaji_word(self, word: Any) -> str:
            self._surfaces.append(word.surface)  # one call per token, in order
            return str(super()._romaji_word(word))

        def tokens(self, words: list[Any]) -> tuple[list[Any], list[int]]:
            """The romanizer's tokens and, per token, how many of ``words`` it joined (dictionary words).

            The romanizer looks for the longest dictionary word at each word by joining every word after
            it (all of koe's words are of one type): cubic in a text's words, minutes for a few thousand.
            No dictionary word holds a punctuation mark, so the words are romanized a sentence or clause at
            a time (:func:`_clauses`), which gives the same tokens in time linear in the text.
            """
            self._surfaces = []
            tokens: list[Any] = []
            for clause in _clauses(words):
                tokens += self._romaji_tokens(clause)
            groups: list[int] = []
            index = 0
            for surface in self._surfaces:
                joined, count = "", 0
                while len(joined) < len(surface):
                    joined += words[index + count].surface
                    count += 1
                groups.append(count)
                index += count
            return tokens, groups

    return Romanizer()


#: Marks that end a clause for the romanizer: no word of its dictionary holds one, and what it does at a
#: mark touches only the token before it.
_CLAUSE_MARKS = frozenset("、。，．,.！？!?「」『』（）()…・：；:;")


def _clauses(words: list[Any]) -> list[list[Any]]:
    """``words`` cut after each run of clause marks (a mark run stays with the clause it ends)."""
    clauses: list[list[Any]] = []
    start = 0
    for index in range(1, len(words)):
        if _is_mark(words[index - 1]) and not _is_mark(words[index]):
            clauses.append(words[start:index])
            start = index
    clauses.append(words[start:])
    return clauses


def _is_mark(word: Any) -> bool:
    return bool(word.surface) and all(char in _CLAUSE_MARKS for char in word.surface)


#: The word type misaki's romanizer reads by its reading (fugashi's "kana or kanji"); OpenJTalk's readings
#: are always usable, so every word is of this type.
_KANA_TYPE = 6


def _runs(text: str, english: bool) -> list[tuple[int, int, bool]]:
    """``[start, end, is_english)`` runs covering ``text``: Latin words (not short acronyms) when
    ``english``, the rest Japanese."""
    runs: list[tuple[int, int, bool]] = []
    cursor = 0
    if english:
        for match in _LATIN_RUN.finditer(text):
            if _ACRONYM.fullmatch(match.group().rstrip(".,!?;:")):
                continue
            if match.start() > cursor:
                runs.append((cursor, match.start(), False))
            runs.append((match.start(), match.end(), True))
            cursor = match.end()
    if cursor < len(text):
        runs.append((cursor, len(text), False))
    return runs


def _assemble(tokens: list[Any]) -> tuple[str, list[tuple[int, int] | None]]:
    """The romanizer's tokens joined as it joins them, and where each token's sounds are in the result."""
    chars: list[tuple[str, int]] = []
    for index, token in enumerate(tokens):
        chars += [(char, index) for char in token.surface.replace("(", "«").replace(")", "»")]
        if token.space:
            chars.append((" ", -1))
    collapsed: list[tuple[str, int]] = []
    for char, owner in chars:
        if char.isspace():
            if collapsed and collapsed[-1][0] != " ":
                collapsed.append((" ", -1))
        else:
            collapsed.append((char, owner))
    while collapsed and collapsed[-1][0] == " ":
        collapsed.pop()
    text = "".join(char for char, _ in collapsed)
    drop = {match.start() for match in _GLOTTAL_SPACE.finditer(text)}
    kept = [pair for position, pair in enumerate(collapsed) if position not in drop]
    phonemes = "".join(char for char, _ in kept)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for position, (char, owner) in enumerate(kept):
        if owner >= 0 and char not in _PUNCTUATION:
            first.setdefault(owner, position)
            last[owner] = position
    spans = [(first[index], last[index] + 1) if index in first else None for index in range(len(tokens))]
    return phonemes, spans


def _align(text: str, surfaces: list[str]) -> list[tuple[int, int] | None]:
    """Each OpenJTalk word's span in ``text``.

    OpenJTalk gives its words back normalized (full-width letters, 3 as 三); both sides are compared after
    NFKC. A word not found where expected was rewritten: the words before the next one found share the text
    between (a number read as several words is timed as one).
    """
    canon: list[str] = []
    source: list[int] = []
    for index, char in enumerate(text):
        for folded in unicodedata.normalize("NFKC", char):
            canon.append(folded)
            source.append(index)
    folded_text = "".join(canon)
    source.append(len(text))
    spans: list[tuple[int, int] | None] = [None] * len(surfaces)
    cursor = 0
    pending: list[int] = []
    for index, surface in enumerate(surfaces):
        wanted = unicodedata.normalize("NFKC", surface)
        at = _skip_space(folded_text, cursor)
        found = at if wanted and folded_text.startswith(wanted, at) else -1
        if found < 0 and pending and wanted:
            found = folded_text.find(wanted, at, at + _REWRITE_REACH + len(wanted))
        if found < 0:
            pending.append(index)
            continue
        if pending:
            _share(spans, pending, source[at], source[found])
            pending = []
        spans[index] = (source[found], source[found + len(wanted)])
        cursor = found + len(wanted)
    if pending:
        _share(spans, pending, source[_skip_space(folded_text, cursor)], len(text))
    return spans


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _share(spans: list[tuple[int, int] | None], words: list[int], start: int, end: int) -> None:
    if end > start:
        for index in words:
            spans[index] = (start, end)


def _joined(pieces: list[tuple[str, list[WordSpan]]], offsets: list[int]) -> tuple[str, list[WordSpan]]:
    """Runs' phonemes joined by spaces, their spans moved to the whole text and the joined phonemes."""
    out = ""
    spans: list[WordSpan] = []
    for (phonemes, words), offset in zip(pieces, offsets, strict=True):
        if not phonemes:
            continue
        if out:
            out += " "
        base = len(out)
        spans += [
            WordSpan(w.text_start + offset, w.text_end + offset, w.phoneme_start + base, w.phoneme_end + base)
            for w in words
        ]
        out += phonemes
    return out, spans
