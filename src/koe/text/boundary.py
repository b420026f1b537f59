"""Incremental boundary scanner: where streamed text *may* be cut, each place decided only once certain.

The scanner reads the turn's text once, left to right, and reports candidate cut points (clause ends,
sentence ends, line breaks, fenced code blocks) in order.  Whenever a decision depends on characters that
have not arrived yet ("Dr." + ?, "3." + ?, "!" + "?"), it stops at that point and resumes there on the
next feed, so a candidate, once reported, holds for every possible continuation of the text.  That is
what makes the segmenter's output independent of how the text was cut into tokens.

Languages differ here only in their abbreviations and, in Spanish, in the ``¿``/``¡`` that open a question
or exclamation no clause cut may split (:class:`koe.text.languages.base.TextRules`); the Hindi danda
(``।``) and a mark after a space (French "Ça va ?") end sentences in every language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, IntEnum

from koe.text.languages.base import Abbreviations
from koe.text.markup import element_end


class Kind(IntEnum):
    """How strongly a candidate ends speech; larger is stronger."""

    CLAUSE = 1  # comma, semicolon, colon, dash, CJK 、: a pause inside a sentence
    SENTENCE = 2  # . ! ? … 。 followed by what proves the sentence is over
    HARD = 3  # line break: list items, headings, paragraphs never share a segment
    SKIP = 4  # a fenced code block starts here; nothing of it is spoken


@dataclass(frozen=True, slots=True)
class Boundary:
    """A place the text may be cut: speech may end at ``end``; the next starts at ``resume`` or later."""

    end: int
    kind: Kind
    resume: int


_TERMINALS = frozenset(".!?…。！？｡।॥")
_PERIODS = frozenset(".…")
_CLAUSES = frozenset(",;:，；：、")
_CJK_CLAUSES = frozenset("，；：、")
_CLOSERS = frozenset("\"'”’)]}»」』）】")
_OPENERS = "\"'“‘([{«「『（【"
_DASHES = frozenset("—–-")
_FENCE_CHARS = frozenset("`~")
#: What may end a phrase: a sentence's or a clause's mark, or a dash.
_PAUSES = _TERMINALS | _CLAUSES | _DASHES


def ends_at_pause(text: str) -> bool:
    """Whether ``text`` ends where speech pauses (a sentence's or a clause's mark, closing quotes or
    brackets after it allowed), not in the middle of a phrase."""
    stripped = text.rstrip().rstrip("".join(_CLOSERS))
    return stripped[-1:] in _PAUSES if stripped else False


#: Characters the scanner must look at; everything between them is skipped by one regex search.
_INTERESTING = re.compile(r"[\n.!?…。！？｡।॥,;:，；：、—–\-`~¿¡\[]")
#: Spanish marks that open a question or an exclamation, closed by the next ``?`` or ``!``.
_INVERTED = frozenset("¿¡")
#: How much text before the scan position is kept: the longest look-back (an abbreviation) fits in it.
KEEP_BEHIND = 16
#: Line heads longer than this cannot be list markers or fences, so only this much of a line is kept.
_LINE_HEAD_CAP = 8

#: Abbreviations that precede a name, an example or a day ("Jan. 15") and so never end a sentence.
_NEVER_END = frozenset(
    "mr mrs ms dr prof sr jr st mt vs e.g i.e cf viz fig approx ca no vol pp gen col lt sgt rev incl ext "
    "a.k.a jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
#: Abbreviations that end a sentence only when the next word is capitalised ("etc. Then" vs "etc. and").
_MAYBE_END = frozenset(
    "etc inc ltd co corp a.m p.m u.s u.k u.n e.u ph.d al dept min max pop ave blvd rd".split()
)
_ENGLISH = Abbreviations(_NEVER_END, _MAYBE_END)
#: A word that is part of a URL or path: its "?" or "!" may be a query, not the end of a question.
_URL_LIKE = re.compile(r"[/=&@]")
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_LIST_NUMBER = re.compile(r"[ \t]*\d{1,3}")
#: A closing fence line may be indented by spaces and tabs.
_INDENT = re.compile(r"[ \t]*")


def _is_upper_start(ch: str | None) -> bool:
    """Whether the next word proves a new sentence: a capital, a digit, an opening quote, or end of text."""
    return ch is None or ch.isupper() or ch.isdigit() or ch in _OPENERS


class Scanner:
    """Holds the unreleased tail of a turn's text and reports its boundaries as they become certain.

    Offsets are absolute positions in the turn's text.  ``settled`` is the position before which every
    boundary has been reported.  The caller releases text it no longer needs with :meth:`release`.
    """

    def __init__(self, abbreviations: Abbreviations | None = None, inverted_marks: bool = False) -> None:
        """``abbreviations``: the language's (English by default); ``inverted_marks``: ``¿…?`` and
        ``¡…!`` are not cut at their clauses."""
        self._abbreviations = abbreviations or _ENGLISH
        self._inverted_marks = inverted_marks
        self._inverted_open = False  # inside ¿…? or ¡…!: no clause ends
        self._buf = ""
        self._base = 0  # absolute offset of _buf[0]
        self._pos = 0  # absolute scan position: boundaries ending before it are reported
        self._line_head = ""  # the current line's first characters, up to the first non-space run
        self._fence: str | None = None  # the open fence ("```" or "~~~") while inside a code block
        self._fence_start = 0
        # where the search for the closing fence goes on (absolute), and what it is looking at there: a
        # line break, a new line's indentation and first characters, or the rest of the closing fence line
        self._fence_at = 0
        self._fence_phase = _FencePhase.LINE

    @property
    def end(self) -> int:
        """Absolute offset just past the last character fed."""
        return self._base + len(self._buf)

    @property
    def settled(self) -> int:
        """Every boundary ending before this offset has been reported; inside a code block, its start."""
        return self._fence_start if self._fence is not None else self._pos

    def feed(self, text: str) -> None:
        self._buf += text

    def text(self, start: int, end: int) -> str:
        """The fed text in ``[start, end)`` (absolute offsets, not before the last release)."""
        return self._buf[start - self._base : end - self._base]

    def match_end(self, pattern: re.Pattern[str], start: int) -> int:
        """Absolute end of ``pattern`` matched at ``start`` (a pattern that matches the empty string)."""
        match = pattern.match(self._buf, start - self._base)
        return self._base + (match.end() if match else start - self._base)

    def release(self, upto: int) -> None:
        """Forget text before ``upto``, keeping the look-back the scanner itself still needs."""
        cut = min(upto, self._pos - KEEP_BEHIND, self._fence_start if self._fence else upto) - self._base
        if cut > 0:
            self._buf = self._buf[cut:]
            self._base += cut

    def scan(self, final: bool) -> list[Boundary]:
        """Advance over the fed text and return the boundaries now certain, in order.

        Args:
            final: no more text will come, so the end of the text decides what it still leaves open.
        """
        found: list[Boundary] = []
        buf, base = self._buf, self._base
        i = self._pos - base
        while i < len(buf):
            if self._fence is not None:
                nxt = self._scan_fence(self._fence, i, final, found)
            else:
                match = _INTERESTING.search(buf, i)
                stop = match.start() if match else len(buf)
                if stop > i:
                    self._grow_head(buf[i:stop])
                    i = stop
                    continue
                nxt = self._scan_mark(i, final, found)
            if nxt is None:
                break
            i = nxt
        self._pos = base + i
        return found

    def _grow_head(self, piece: str) -> None:
        if len(self._line_head) < _LINE_HEAD_CAP:
            self._line_head = (self._line_head + piece)[:_LINE_HEAD_CAP]

    def _at_line_start(self) -> bool:
        return not self._line_head.strip()

    def _scan_mark(self, i: int, final: bool, found: list[Boundary]) -> int | None:
        """Decide the interesting character at buffer index ``i``; None means: wait for more text."""
        ch = self._buf[i]
        if ch == "\n":
            found.append(Boundary(self._base + i, Kind.HARD, self._base + i + 1))
            self._line_head = ""
            self._inverted_open = False
            return i + 1
        if ch == "[":
            return self._scan_markup(i, final)
        if ch in _INVERTED:
            self._inverted_open = self._inverted_marks
            self._grow_head(ch)
            return i + 1
        if ch in _FENCE_CHARS and self._at_line_start():
            return self._open_fence(i, final)
        if ch in _TERMINALS:
            return self._scan_terminal(i, final, found)
        if ch in _CLAUSES:
            return self._scan_clause(i, final, found)
        if ch in _DASHES:
            return self._scan_dash(i, final, found)
        self._grow_head(ch)
        return i + 1

    def _scan_markup(self, i: int, final: bool) -> int | None:
        """A pronunciation element (:mod:`koe.text.markup`) is passed over whole: nothing inside it is a
        boundary; while the text after a ``[`` may still become one, wait for more."""
        end = element_end(self._buf, i, final)
        if end is None:
            return None
        end = max(end, i + 1)
        self._grow_head(self._buf[i:end])
        return end

    def _run_end(self, i: int, chars: frozenset[str]) -> int:
        while i < len(self._buf) and self._buf[i] in chars:
            i += 1
        return i

    def _closed_run(self, i: int, chars: frozenset[str], final: bool) -> tuple[int, int] | None:
        """End of the punctuation run at ``i`` and of the closing quotes after it, once both are known."""
        run_end = self._run_end(i, chars)
        close_end = self._run_end(run_end, _CLOSERS)
        if close_end == len(self._buf) and not final:
            return None
        return run_end, close_end

    def _next_char(self, i: int) -> str | None:
        return self._buf[i] if i < len(self._buf) else None

    def _next_word_start(self, i: int, final: bool) -> tuple[bool, str | None]:
        """First non-space character at or after ``i`` (None: end of text); ``(False, None)``: unknown yet."""
        j = i
        while j < len(self._buf) and self._buf[j].isspace():
            if self._buf[j] == "\n":
                return True, None  # a line break ends the sentence whatever follows
            j += 1
        if j == len(self._buf):
            return final, None
        return True, self._buf[j]

    def _word_before(self, i: int) -> str:
        start = max(0, i - KEEP_BEHIND)
        word = self._buf[start:i].rsplit(None, 1)[-1] if self._buf[start:i].strip() else ""
        return word.lstrip(_OPENERS)

    def _scan_terminal(self, i: int, final: bool, found: list[Boundary]) -> int | None:
        ch = self._buf[i]
        if ch in _PERIODS:
            return self._scan_period(i, final, found)
        before = self._buf[i - 1] if i > 0 else " "
        if before.isspace():
            after = self._next_char(i + 1)
            if after is None and not final:
                return None  # "Ça va ?" (French spacing) or "![image]": the next character decides
            if after is not None and not after.isspace() and after not in _CLOSERS:
                self._grow_head(ch)
                return i + 1  # "![image]", "a != b": not the end of a word, so not the end of a sentence
        if ch in "!?" and _URL_LIKE.search(self._word_before(i)):
            after = self._next_char(i + 1)
            if after is None and not final:
                return None  # ".../search?q=1" or the end of a sentence about a path: the next char decides
            if after is not None and not after.isspace():
                self._grow_head(ch)
                return i + 1
        # "!", "?", "。" decide at once: the sentence is over, whatever follows ("?!", a closing quote)
        # starts the next segment and is skipped there as unspeakable.
        found.append(Boundary(self._base + i + 1, Kind.SENTENCE, self._base + i + 1))
        self._inverted_open = False
        self._grow_head(ch)
        return i + 1

    def _scan_period(self, i: int, final: bool, found: list[Boundary]) -> int | None:
        """A run of periods or ellipses ends a sentence only if the characters after it say so."""
        ends = self._closed_run(i, _PERIODS, final)
        if ends is None:
            return None
        run_end, close_end = ends
        run = self._buf[i:run_end]
        after = self._next_char(close_end)
        is_end: bool | None
        if after is not None and not after.isspace():
            is_end = False  # 3.14, example.com, wait...what, "Stop."he
        elif "…" in run or len(run) >= 3:
            is_end = self._ellipsis_ends(close_end, final, found)
        else:
            is_end = self._period_ends(i, close_end, final)
        if is_end is None:
            return None
        if is_end:
            found.append(Boundary(self._base + close_end, Kind.SENTENCE, self._base + close_end))
        self._grow_head(self._buf[i:close_end])
        return close_end

    def _ellipsis_ends(self, close_end: int, final: bool, found: list[Boundary]) -> bool | None:
        """An ellipsis ends a sentence before a capital; before a lower-case word it is only a pause."""
        known, nxt = self._next_word_start(close_end, final)
        if not known:
            return None
        if _is_upper_start(nxt):
            return True
        if not self._inverted_open:
            found.append(Boundary(self._base + close_end, Kind.CLAUSE, self._base + close_end))
        return False

    def _period_ends(self, i: int, close_end: int, final: bool) -> bool | None:
        """Whether a period followed by a space ends a sentence (None: the next word must decide)."""
        if self._line_head and _LIST_NUMBER.fullmatch(self._line_head) and close_end == i + 1:
            return False  # "2. " opening a line is a list marker
        word = self._word_before(i)
        lower = word.lower()
        if lower in self._abbreviations.never or (len(word) == 1 and word.isalpha()):
            return False  # Dr. Smith, e.g. this, J. R. R. Tolkien
        if lower in self._abbreviations.maybe or _ACRONYM.fullmatch(word):
            known, nxt = self._next_word_start(close_end, final)
            return _is_upper_start(nxt) if known else None
        return True

    def _scan_clause(self, i: int, final: bool, found: list[Boundary]) -> int | None:
        ends = self._closed_run(i, _CLAUSES, final)
        if ends is None:
            return None
        run_end, close_end = ends
        after = self._next_char(close_end)
        cjk = any(c in _CJK_CLAUSES for c in self._buf[i:run_end])
        if (cjk or after is None or after.isspace()) and not self._inverted_open:
            found.append(Boundary(self._base + close_end, Kind.CLAUSE, self._base + close_end))
        self._grow_head(self._buf[i:close_end])
        return close_end

    def _scan_dash(self, i: int, final: bool, found: list[Boundary]) -> int | None:
        run_end = self._run_end(i, _DASHES)
        if run_end == len(self._buf) and not final:
            return None
        run = self._buf[i:run_end]
        before = self._buf[i - 1] if i > 0 else "\n"
        after = self._next_char(run_end)
        spaced = before.isspace() and (after is None or after.isspace())
        if spaced and len(run) == 1 and run != "—" and i >= 2 and self._buf[i - 2].isdigit():
            digit_after = self._buf[run_end + 1 : run_end + 2]
            if not digit_after and not final and after is not None:
                return None  # "2019 - " may be a range: the character after the space decides
            spaced = not digit_after.isdigit()  # "2019 - 2022" is a range, read "2019 to 2022"
        if not self._at_line_start() and ("—" in run or len(run) >= 2 or spaced) and not self._inverted_open:
            found.append(Boundary(self._base + run_end, Kind.CLAUSE, self._base + run_end))
        self._grow_head(run)
        return run_end

    def _open_fence(self, i: int, final: bool) -> int | None:
        """At a line start, three backticks or tildes open a code block; fewer may still become one."""
        head = self._buf[i : i + 3]
        fence = "```" if head[:1] == "`" else "~~~"
        if head == fence:
            self._fence = fence
            self._fence_start = self._base + i
            self._fence_at, self._fence_phase = self._base + i + 3, _FencePhase.LINE
            return i + 3
        if len(head) < 3 and fence.startswith(head) and not final:
            return None
        self._grow_head(self._buf[i])
        return i + 1

    def _scan_fence(self, fence: str, i: int, final: bool, found: list[Boundary]) -> int | None:
        """Inside a code block: find its closing fence line, then report the whole block as one SKIP.

        The search resumes where it stopped, so each character of the block is looked at once however
        the text is fed (a closing fence is a line starting, after spaces or tabs, with the same fence).
        """
        buf = self._buf
        at = max(i, self._fence_at - self._base)
        resume: int | None = None
        while resume is None:
            if self._fence_phase is _FencePhase.LINE:
                line_break = buf.find("\n", at)
                if line_break < 0:
                    at = len(buf)
                    if not final:
                        break
                    resume = len(buf)  # an unclosed block runs to the end of the turn
                else:
                    at, self._fence_phase = line_break + 1, _FencePhase.HEAD
            elif self._fence_phase is _FencePhase.HEAD:
                indent_end = _INDENT.match(buf, at)
                assert indent_end is not None  # the pattern matches the empty string
                at = indent_end.end()
                head = buf[at : at + 3]
                if head == fence:
                    at, self._fence_phase = at + 3, _FencePhase.CLOSING
                elif fence.startswith(head) and at + len(head) == len(buf) and not final:
                    break  # the line so far ("", "`", "``") may still become the closing fence
                elif at == len(buf) and final:
                    resume = len(buf)
                else:
                    self._fence_phase = _FencePhase.LINE
            else:  # the closing fence line: the block ends with it, line break included
                line_break = buf.find("\n", at)
                if line_break >= 0:
                    resume = line_break + 1
                elif final:
                    resume = len(buf)
                else:
                    at = len(buf)
                    break
        self._fence_at = self._base + at
        if resume is None:
            return None
        found.append(Boundary(self._fence_start, Kind.SKIP, self._base + resume))
        self._fence = None
        self._line_head = ""
        return resume


class _FencePhase(Enum):
    """What the search for a closing fence looks at next."""

    LINE = "line"  # the next line break
    HEAD = "head"  # a line's indentation and first three characters
    CLOSING = "closing"  # the rest of a closing fence line, to its line break
