"""Mandarin: misaki's pinyin → IPA reading (the one Kokoro v1.0's Chinese voices were trained on).

jieba cuts the text into words, pypinyin gives each word's tones, misaki maps them to Kokoro's symbols
(tone arrows included) — what ``misaki.zh.ZHG2P()`` does, done word by word here so that every word is
timed. Arabic numbers are read by cn2an (15% → 百分之十五, a year digit by digit: 2025年 → 二零二五年),
each number one timed word; their decimals are read digit by digit here (3.14 → 三点一四), as is a whole
part longer than cn2an reads (it cuts decimals at 16 digits and fails on a longer whole part).
Latin-script words go to the English G2P when one is given (docs/languages.md), as misaki's newer
Chinese frontend does. jieba builds its prefix dictionary on first use (a second or two) and caches it in
the temporary directory.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from koe.engine.timing import WordSpan
from koe.errors import AssetError, SynthesisError
from koe.g2p.base import G2P
from koe.g2p.symbols import keep_known

logger = logging.getLogger(__name__)

INSTALL = "pip install jieba==0.42.1 pypinyin==0.55.0 cn2an==0.5.24 ordered-set==4.1.0"
_PIECE = re.compile(
    r"(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)"
    r"|(?P<number>\d+(?:\.\d+)?%?年?)"
    r"|(?P<latin>[A-Za-z][A-Za-z'’-]*(?:[ \t,;:]*[ \t][A-Za-z][A-Za-z'’-]*)*[.,!?;:]*)"
    r"|(?P<space>\s+)"
    r"|(?P<mark>.)",
    re.S,
)
#: A number piece: its whole part, decimals, percent sign and year mark.
_NUMBER = re.compile(r"(\d+)(?:\.(\d+))?(%?)(年?)")
#: The longest whole part cn2an reads as a number; past it, it gives the digits back and the reading fails.
_CN2AN_DIGITS = 16
_DIGITS = "零一二三四五六七八九"
#: Chinese punctuation → the marks Kokoro knows (misaki's own mapping); a pause, not a word.
_MARKS = {
    "、": ",", "，": ",", "。": ".", "．": ".", "！": "!", "：": ":", "；": ";", "？": "?",
    "«": "“", "»": "”", "《": "“", "》": "”", "「": "“", "」": "”", "【": "“", "】": "”",
    "（": "(", "）": ")",
}  # fmt: skip
#: Marks that open: a space goes before them, not after.
_OPENING = frozenset("“(")
#: misaki's Chinese reading leaves a combining mark (U+032F, a non-syllabic vowel) that Kokoro's vocabulary
#: lacks; misaki drops it, and so does koe (not an unknown symbol to report).
_INVERTED_BREVE = "\u032f"
_PUNCTUATION = '!"(),.:;?—…“”'


def _modules() -> tuple[Any, Any, Any]:
    try:
        import cn2an
        import jieba
        from misaki.zh import ZHG2P
    except ModuleNotFoundError as exc:
        raise AssetError(f"Mandarin G2P needs {exc.name}: `{INSTALL}`", code="language_unavailable") from exc
    jieba.setLogLevel(logging.WARNING)
    return jieba, cn2an, ZHG2P


class MandarinG2P:
    """Mandarin text → Kokoro phonemes; each jieba word (and each number) is a timed word."""

    lang = "zh"

    def __init__(self, english: Callable[[], G2P] | None = None) -> None:
        self._jieba, self._cn2an, self._zh = _modules()
        self._english = english
        self._lock = threading.Lock()
        self._jieba.initialize()

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        out = ""
        spans: list[WordSpan] = []
        for match in _PIECE.finditer(text):
            kind, piece = match.lastgroup, match.group()
            if kind == "space":
                continue
            if kind == "mark":
                out = _mark(out, keep_known(_MARKS.get(piece, piece), self.lang, piece))
                continue
            for start, end, said, words in self._words(kind, piece, match.start()):
                phonemes = keep_known(said.replace(_INVERTED_BREVE, ""), self.lang, text[start:end])
                if not phonemes:
                    continue
                if out and not out.endswith((" ", *_OPENING)):
                    out += " "
                base = len(out)
                out += phonemes
                if words is None:
                    spans.append(WordSpan(start, end, base, base + len(phonemes)))
                else:
                    spans += [WordSpan(w.text_start + start, w.text_end + start, w.phoneme_start + base,
                                       w.phoneme_end + base) for w in words]  # fmt: skip
        return out, spans

    def _words(
        self, kind: str | None, piece: str, at: int
    ) -> list[tuple[int, int, str, list[WordSpan] | None]]:
        """``(start, end, phonemes, inner spans or None)`` for each word of a piece of one kind."""
        if kind == "latin":
            if self._english is None:
                logger.info(
                    "Mandarin G2P has no English reader; %d Latin characters are not spoken", len(piece)
                )
                return []
            phonemes, words = self._english().phonemize_words(piece)
            return [(at, at + len(piece), phonemes, words)]
        with self._lock:
            try:
                if kind == "number":
                    return [(at, at + len(piece), self._han(self._number(piece)), None)]
                result: list[tuple[int, int, str, list[WordSpan] | None]] = []
                for word, start, end in self._jieba.tokenize(piece):
                    result.append((at + start, at + end, self._zh.word2ipa(word), None))
                return result
            except Exception as exc:  # jieba, pypinyin and cn2an raise assorted errors on odd input
                raise SynthesisError(f"Mandarin G2P failed on {piece!r}: {exc}") from exc

    def _number(self, piece: str) -> str:
        """A number piece in Chinese characters (see the module)."""
        match = _NUMBER.fullmatch(piece)
        assert match is not None  # a number piece is what _PIECE's number group matched
        whole, decimals, percent, year = match.groups()
        if decimals is None and len(whole) <= _CN2AN_DIGITS:
            return str(self._cn2an.transform(piece, "an2cn"))
        said = str(self._cn2an.transform(whole, "an2cn")) if len(whole) <= _CN2AN_DIGITS else _digits(whole)
        if decimals is not None:
            said += "点" + _digits(decimals)
        return ("百分之" if percent else "") + said + year

    def _han(self, text: str) -> str:
        """Chinese characters (a number cn2an wrote out) as phonemes, word by word."""
        return " ".join(self._zh.word2ipa(word) for word in self._jieba.lcut(text))


def _digits(digits: str) -> str:
    """Arabic digits as Chinese ones, one by one (0 → 零)."""
    return "".join(_DIGITS[int(digit)] for digit in digits)


def _mark(out: str, mark: str) -> str:
    """A punctuation mark joins the word before it (an opening one goes before the next, after a space)."""
    if mark in _OPENING:
        return f"{out} {mark}" if out else mark
    return out.rstrip() + mark if mark else out
