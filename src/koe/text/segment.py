"""Incremental segmenter: cuts a streamed LLM answer into speakable segments as early as is certain.

Policy (docs/text.md has the reasons and examples):

* the first segment of a turn ends at the first sentence end, or at the first clause end (comma,
  semicolon, colon, dash) once it holds ``first_min_words`` words (in the language's units: morae in
  Japanese, characters in Mandarin, :mod:`koe.text.languages`), so audio starts early without a
  clipped "Sure," fragment;
* later segments end at sentence ends; a sentence shorter than ``merge_below_chars`` is merged with the
  next ones while the whole stays within ``target_chars``;
* line breaks (list items, headings, paragraphs) always end a segment; fenced code blocks are skipped;
* no segment is longer than the limit: the caller's hint (:meth:`Segmenter.set_next_limit`) or
  ``max_chars``.  A longer sentence is cut at its last clause end within the limit, else at a word
  boundary; the hard ``max_chars`` keeps each segment's phonemes inside Kokoro's 510-token window.

Every cut is taken only once no later character can change it, so the segments do not depend on how the
text was split into tokens.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from koe.errors import ConfigError
from koe.text.boundary import Boundary, Kind, Scanner
from koe.text.languages.base import ENGLISH, TextRules
from koe.text.markup import spans as markup_spans
from koe.text.normalize import Alignment
from koe.text.spoken import LINK_TARGET

#: misaki makes about 1-1.3 phoneme tokens per English character; 390 characters stay within 510 tokens.
MAX_SEGMENT_CHARS = 390
#: A word for the minimum-words rules: a letter/digit run ("it's" is one), or one CJK character.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+(?:['’](?:(?![{_CJK}])[^\W_])+)*")
_CJK_CHAR = re.compile(rf"[{_CJK}]")
#: Two characters one word may run across (letters or digits, or an apostrophe inside a word).
_JOINS = re.compile(rf"(?:(?![{_CJK}])[^\W_]|['’]){{2}}")
#: Passed candidates are dropped from the list once this many have accumulated.
_COMPACT_CANDIDATES = 256
#: What a segment never starts with: space, and punctuation left over from the previous sentence's end.
_LEADING = re.compile(r"[\s”’)\]}»」』）】.!?…。！？｡,;:，；：、।॥]*")
#: A markdown link's target, "](https://...)": never said, so it does not count toward a caller's limit.
_LINK_TARGET = re.compile(rf"\]\({LINK_TARGET}\)")
_OPEN_LINK_TARGET = re.compile(rf"\]\({LINK_TARGET}(?:\([^()\s]{{0,300}})?\Z")
#: A sentence (or usable clause) that ends at most this many English characters of speech past a
#: caller's limit ends the segment there, rather than being cut before its last word or two ("…range from
#: -5 to 10 / degrees." is heard as two sentences); about a second of speech.
STRAND_CHARS = 16


@dataclass(frozen=True, slots=True)
class SegmenterOptions:
    """How the segmenter cuts; every length is in characters of the source text.

    Attributes:
        first_min_words: the first segment may end at a clause boundary once it has this many words;
            also the fewest words a cut inside a sentence leaves in a segment.
        merge_below_chars: a later sentence shorter than this is merged with the next one(s).
        target_chars: merged sentences stay within this length.
        max_chars: hard maximum of a segment (at most :data:`MAX_SEGMENT_CHARS`).
    """

    first_min_words: int = 3
    merge_below_chars: int = 20
    target_chars: int = 100
    max_chars: int = 300

    def __post_init__(self) -> None:
        if self.first_min_words < 1:
            raise ConfigError(f"expected first_min_words >= 1, got {self.first_min_words}")
        if not 1 <= self.merge_below_chars <= self.target_chars <= self.max_chars <= MAX_SEGMENT_CHARS:
            raise ConfigError(
                "expected 1 <= merge_below_chars <= target_chars <= max_chars <= "
                f"{MAX_SEGMENT_CHARS}, got {self.merge_below_chars}, {self.target_chars}, {self.max_chars}"
            )


@dataclass(frozen=True, slots=True)
class Segment:
    """One speakable piece of a turn.

    Attributes:
        text: the original characters, ``turn_text[source_span[0]:source_span[1]]``.
        spoken_text: the normalized text for G2P (never empty: unspeakable pieces are not emitted).
        source_span: ``[start, end)`` offsets into the turn's full text as fed.
        index: 0-based position among the turn's segments.
        is_first: the turn's first segment (cut by the first-clause rule).
        alignment: for each character of ``spoken_text``, its span in the turn's text; use
            ``alignment.source_span(start, end)`` to find where a spoken word came from.
    """

    text: str
    spoken_text: str
    source_span: tuple[int, int]
    index: int
    is_first: bool
    alignment: Alignment = field(repr=False)

    def joined(self, later: Segment) -> Segment:
        """This segment and ``later``, which follows it, spoken as one: a space between their spoken
        texts (and between their texts, whatever separated them in the turn's text)."""
        gap_start, gap_end = self.source_span[1], later.source_span[0]
        alignment = Alignment(
            (*self.alignment.starts, gap_start, *later.alignment.starts),
            (*self.alignment.ends, gap_end, *later.alignment.ends),
        )
        return Segment(
            text=f"{self.text} {later.text}",
            spoken_text=f"{self.spoken_text} {later.spoken_text}",
            source_span=(self.source_span[0], later.source_span[1]),
            index=self.index,
            is_first=self.is_first,
            alignment=alignment,
        )


@dataclass(slots=True)
class _WordCounts:
    """Word counts from ``start`` to each end asked for (``last``: the furthest)."""

    start: int
    last: int = -1
    at: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Breaks:
    """The turn's word breaks (where a cut splits no word), each position examined once."""

    positions: list[int] = field(default_factory=list)
    examined: int = 0  # every position up to here is examined

    def between(
        self, scanner: Scanner, start: int, end: int, is_break: Callable[[str, int], bool]
    ) -> list[int]:
        """The breaks in ``(start, end]`` (``is_break`` looks at a position's two neighbours only, so a
        position is examined once); positions before ``start`` are never asked for again."""
        del self.positions[: bisect.bisect_right(self.positions, start)]
        self.examined = max(self.examined, start)
        if end > self.examined:
            text = scanner.text(self.examined, end + 1)
            self.positions += [self.examined + i for i in range(1, len(text)) if is_break(text, i)]
            self.examined += max(0, len(text) - 1)
        return self.positions[: bisect.bisect_right(self.positions, end)]


@dataclass(slots=True)
class _Progress:
    """How far :meth:`Segmenter._next_cut` read one window's candidates (indices from the first kept one):
    what it found before the limit, and where its searches past the limit stopped."""

    key: tuple[int, int, int, bool, int]  # the window's start, limit, target, first, and passed candidates
    index: int = 0  # candidates read before the limit without a decision
    merged: int | None = None
    clause: int | None = None
    overflow: int | None = None  # the first candidate past the limit
    usable: int = 0  # the next candidate to try as the first usable end past the limit
    usable_known: bool = False
    usable_end: int | None = None
    hard: int = 0  # the next candidate to look at for the first line break past the limit
    hard_end: int | None = None


@dataclass(slots=True)
class _Window:
    """The limits that apply to the segment being cut, and where it starts."""

    start: int
    first: bool
    limit: int
    target: int


class Segmenter:
    """Feeds on a turn's text piece by piece and returns each segment once its end is certain.

    Not thread-safe; one per turn stream.  Pure: no I/O, no clock, so cancelling a caller between calls
    is always safe (:meth:`reset` starts the next turn).  ``language``: the text's rules (English by
    default; :func:`koe.text.languages.segmenter_for` builds a language's segmenter).
    """

    def __init__(self, options: SegmenterOptions | None = None, language: TextRules = ENGLISH) -> None:
        self._options = options or SegmenterOptions()
        self._language = language
        self._first_min = language.first_min_units(self._options.first_min_words)
        self._strand = max(1, round(STRAND_CHARS / language.chars_per_char))
        self.reset()

    @property
    def max_chars(self) -> int:
        """The hard maximum of a segment (its options' ``max_chars``): a caller joining segments keeps to it
        too, so that no segment's G2P and phonemes grow with the text."""
        return self._options.max_chars

    def reset(self) -> None:
        """Forget the current turn and its limit; the next text starts a new turn (offsets from 0)."""
        self._scanner = Scanner(self._language.abbreviations, self._language.inverted_marks)
        self._hint: int | None = None
        self._candidates: list[Boundary] = []
        self._head = 0  # candidates before this index are passed (behind the window's start)
        self._passed = 0  # candidates passed in this turn
        self._progress = _Progress((-1, 0, 0, False, 0))
        self._start = 0  # where the unsegmented text begins (absolute)
        self._counts = _WordCounts(0)
        self._breaks = _Breaks()
        self._index = 0
        self._final = False

    def set_next_limit(self, max_chars: int | None) -> None:
        """Bound the length of the segments cut from now on (None: back to the default policy).

        The session raises it as the listener's queued audio grows, so segments start short and grow.
        It is clamped to ``max_chars``; sentences that fit are still cut at their ends.

        Raises:
            ConfigError: ``max_chars`` is below 1.
        """
        if max_chars is not None and max_chars < 1:
            raise ConfigError(f"expected a segment limit >= 1 character or None, got {max_chars}")
        self._hint = max_chars

    def feed(self, text: str) -> list[Segment]:
        """Add LLM output (any piece: a character, a token, a paragraph) and return the segments now certain.

        Raises:
            ConfigError: called after :meth:`flush` without :meth:`reset`.
        """
        if self._final:
            raise ConfigError("expected reset() before feeding a new turn, got feed() after flush()")
        self._scanner.feed(text)
        return self._advance()

    def flush(self) -> list[Segment]:
        """End of the turn: return the rest of the text as segments.  Idempotent until :meth:`reset`."""
        if self._final:
            return []
        self._final = True
        return self._advance()

    def _advance(self) -> list[Segment]:
        self._candidates.extend(self._scanner.scan(self._final))
        out: list[Segment] = []
        while (cut := self._next_cut()) is not None:
            start, end, resume = cut
            segment = self._make(start, end)
            if segment is not None:
                out.append(segment)
            self._start = resume
            self._scanner.release(resume)
        return out

    def _window(self) -> _Window | None:
        """Where the next segment starts (past code blocks and leftover punctuation); None: unknown."""
        candidates = self._candidates
        while True:
            start = self._scanner.match_end(_LEADING, self._start)
            if start == self._scanner.end:
                # all of it is leftover punctuation and space, never spoken: skip it now, or each feed
                # would match the whole run again ("… … …" would be quadratic)
                self._start = start
                self._scanner.release(start)
                return None
            while self._head < len(candidates) and candidates[self._head].end <= start:
                stale = candidates[self._head]
                self._head += 1
                self._passed += 1
                if stale.kind is Kind.SKIP and stale.end == start:
                    self._start = stale.resume
                    break
            else:
                if self._head > _COMPACT_CANDIDATES:
                    del candidates[: self._head]
                    self._head = 0
                limit = min(self._hint or self._options.max_chars, self._options.max_chars)
                return _Window(start, self._index == 0, limit, min(self._options.target_chars, limit))

    def _next_cut(self) -> tuple[int, int, int] | None:
        """The next segment's ``(start, end, resume)`` if it is certain now, else None.

        Candidates are read in order, and how far the reading got is kept for the window (its start and
        limits, and the candidates before it), so each feed reads only the candidates it brought.
        """
        window = self._window()
        if window is None:
            return None
        a, opts = window.start, self._options
        limit = self._limit_past_link_targets(a, window.limit)
        if limit is None:
            return None
        window.limit = limit
        settled = self._scanner.end + 1 if self._final else self._scanner.settled
        key = (a, window.limit, window.target, window.first, self._passed)
        progress = self._progress
        if progress.key != key:
            progress = self._progress = _Progress(key)
        kept = len(self._candidates) - self._head
        total = kept + 1 if self._final else kept  # at the end, the end of the text is a line break too

        def candidate(i: int) -> Boundary:
            if i < kept:
                return self._candidates[self._head + i]
            return Boundary(self._scanner.end, Kind.HARD, self._scanner.end)

        reach = min(window.limit + self._strand, opts.max_chars)  # a usable end up to here is taken
        while progress.overflow is None and progress.index < total:
            b = candidate(progress.index)
            length = b.end - a
            if length > window.limit:
                progress.overflow = progress.usable = progress.hard = progress.index
                break
            if progress.merged is not None and length > window.target and b.kind >= Kind.SENTENCE:
                return a, progress.merged, progress.merged
            if b.kind >= Kind.HARD:
                return a, b.end, b.resume
            enough = self._words(a, b.end) >= self._first_min
            if b.kind is Kind.SENTENCE:
                if window.first or length >= opts.merge_below_chars:
                    return a, b.end, b.resume
                progress.merged = b.end  # end of short sentences being merged
            elif enough and window.first:
                return a, b.end, b.resume
            elif enough:
                progress.clause = b.end  # last clause end within the limit that leaves enough words
            progress.index += 1
        # the first usable end past the limit, in case the limit cannot be kept: a sentence end, line
        # break or enough-words clause end, within the hard maximum
        while progress.overflow is not None and not progress.usable_known and progress.usable < total:
            b = candidate(progress.usable)
            if b.end - a > opts.max_chars:
                progress.usable_known = True
            elif b.kind >= Kind.SENTENCE or self._words(a, b.end) >= opts.first_min_words:
                progress.usable_known, progress.usable_end = True, b.end
            else:
                progress.usable += 1
        if progress.merged is None and progress.usable_end is not None and progress.usable_end - a <= reach:
            b = candidate(progress.usable)  # a sentence ending just past the limit is kept whole
            return a, b.end, b.resume
        if progress.merged is not None and settled > a + window.target:
            return a, progress.merged, progress.merged
        if settled <= a + reach:
            return None
        if progress.clause is not None:
            return a, progress.clause, progress.clause
        # the next line break (before the limit there is none, or it would have been cut at)
        while progress.overflow is not None and progress.hard_end is None and progress.hard < total:
            b = candidate(progress.hard)
            if b.kind >= Kind.HARD:
                progress.hard_end = b.end
            else:
                progress.hard += 1
        word = self._word_cut(a, window.limit, settled, progress.hard_end, progress.usable_end)
        return None if word is None else (a, word, word)

    def _limit_past_link_targets(self, a: int, limit: int) -> int | None:
        """``limit`` characters from ``a``, not counting link targets (the limit is about speaking time;
        "Find it on [GitHub](https://github.com/acme/tool) today." is 25 characters said), within
        ``max_chars``; None while a target that would count is still arriving."""
        top = self._options.max_chars
        if limit >= top:
            return top
        text = self._scanner.text(a, a + top)
        reach = limit
        for target in _LINK_TARGET.finditer(text):
            if target.start() >= reach:
                return min(reach, top)
            reach += target.end() - target.start()
        arriving = _OPEN_LINK_TARGET.search(text)
        if arriving is not None and arriving.start() < reach and not self._final and len(text) < top:
            return None
        return min(reach, top)

    def _words(self, start: int, end: int) -> int:
        """Words (or the language's units) in ``[start, end)``. English counts from one start are kept
        and extended, so a window's candidates, asked for again on every feed, cost only the text since
        the last one counted; a language's units are counted afresh, within one segment's length."""
        if self._language.unit_starts is not None:
            return len(self._language.unit_starts(self._scanner.text(start, end)))
        counts = self._counts
        if counts.start != start:
            counts = self._counts = _WordCounts(start)
        if end not in counts.at:
            last = max(counts.last, start) if end > counts.last else start
            if last > start and _JOINS.fullmatch(self._scanner.text(last - 1, last + 1)):
                last = start  # a word runs across ``last``: count this one from the start
            counts.at[end] = counts.at.get(last, 0) + len(_WORD.findall(self._scanner.text(last, end)))
            counts.last = max(counts.last, end)
        return counts.at[end]

    def _word_starts(self, text: str) -> list[int]:
        """Where each unit of the first-clause rule starts in ``text``: words, or the language's units."""
        if self._language.unit_starts is not None:
            return self._language.unit_starts(text)
        return [m.start() for m in _WORD.finditer(text)]

    def _word_cut(
        self, a: int, limit: int, settled: int, bound: int | None, overflow: int | None
    ) -> int | None:
        """Cut a segment that has no usable boundary within ``limit`` at a word boundary, never mid-word.

        The last word boundary within the limit that leaves ``first_min_words`` words, outside brackets
        if there is one ("the manual (see https://…)" is cut before the bracket, so the normalizer still
        sees the whole aside); else whichever
        comes first of the next such word boundary and ``overflow``; else the last word boundary before
        the hard maximum or the next line break.  A "word" longer than ``max_chars`` (a pasted blob, not
        speech) is cut at ``max_chars``.

        Args:
            settled: text before it is scanned.
            bound: the next line break or block (a segment never crosses it), if known.
            overflow: the first sentence or clause end past the limit, if known.
        """
        stop = a + self._options.max_chars
        if bound is not None:
            stop = min(stop, bound)
        known = min(stop, settled - 1)  # the last position whose character is known
        upto = min(known, self._scanner.end - 1)  # ... and is in the text
        cuts = self._breaks.between(self._scanner, a, upto, self._language.word_break or _is_word_break)
        elements = markup_spans(self._scanner.text(a, upto + 1))
        if elements:  # "[New York](/nˈu jˈɔɹk/)" is one word to the cut: its spaces are not word breaks
            cuts = [c for c in cuts if not any(a + s < c < a + e for s, e in elements)]
        if bound == stop and (not cuts or cuts[-1] != stop):
            cuts.append(stop)
        word_starts = [a + start for start in self._word_starts(self._scanner.text(a, upto + 1))]
        need = self._first_min
        # a cut leaves enough words before it once it comes after the need-th word's start
        first = bisect.bisect_right(cuts, word_starts[need - 1]) if len(word_starts) >= need else len(cuts)
        last_within = bisect.bisect_right(cuts, a + limit) - 1
        if last_within >= first:  # outside brackets if it can be, so an aside reaches the normalizer whole
            within = cuts[first : last_within + 1]
            depth = _bracket_depths(self._scanner.text(a, within[-1]))
            outside = [c for c in within if depth[min(c - a, len(depth) - 1)] == 0]
            return (outside or within)[-1]
        beyond = [c for c in (cuts[first] if first < len(cuts) else None, overflow) if c is not None]
        if beyond:
            return min(beyond)
        if known < stop:
            return None
        return cuts[-1] if cuts else stop

    def _make(self, start: int, end: int) -> Segment | None:
        """The segment ``[start, end)`` with its spoken form, or None if nothing in it is speakable."""
        text = self._scanner.text(start, end).rstrip()
        normalized = self._language.normalize(text)
        if not normalized.spoken:
            return None
        segment = Segment(
            text=text,
            spoken_text=normalized.spoken,
            source_span=(start, start + len(text)),
            index=self._index,
            is_first=self._index == 0,
            alignment=normalized.alignment.shifted(start),
        )
        self._index += 1
        return segment


def _bracket_depths(text: str) -> list[int]:
    """For each index of ``text`` (and its end), how many ``(`` and ``[`` before it are still open."""
    depths, depth = [0], 0
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
        depths.append(depth)
    return depths


def _is_word_break(text: str, i: int) -> bool:
    """Whether cutting ``text`` before index ``i`` splits no word: at a space, or next to a CJK character."""
    if text[i].isspace():
        return not text[i - 1].isspace()
    if text[i - 1].isspace():
        return False
    return bool(_CJK_CHAR.match(text[i]) or _CJK_CHAR.match(text[i - 1]))
