"""An LLM's answer passed on in whole sentences: at most a few, none said twice, never one cut off.

A small model asked for a short spoken answer still loops ("Don't forget your camera." again and again)
and runs into its token cap mid-sentence. :class:`SentenceGate` sits between the LLM's deltas and the TTS
turn. The first sentence is passed on as it is written, so speech starts at its first clause as on every
other path (it cannot repeat an earlier one). Each later sentence is held until the scanner of
:mod:`koe.text.boundary` proves it ended, and dropped if its words repeat one already passed on; by then
the first sentence is being heard, so holding it costs no silence. :attr:`SentenceGate.full` says the
sentence limit is reached, so the caller closes the LLM stream. When the stream ends, a last fragment
without a sentence end (the token cap struck mid-sentence) is dropped, unless it is the first sentence,
already on its way.

Pure and synchronous: no I/O, no clock.
"""

from __future__ import annotations

import re

from koe.text.boundary import Kind, Scanner
from koe.text.languages.lookup import rules_for

#: What makes two sentences "the same" once case, punctuation and spacing are set aside.
_NON_WORD = re.compile(r"\W+")


def _words(sentence: str) -> str:
    """The sentence's words, case-folded and joined by single spaces (empty when it has none)."""
    return _NON_WORD.sub(" ", sentence.casefold()).strip()


class SentenceGate:
    """Turns a stream of deltas into the text that may be spoken, one complete sentence at a time.

    Not thread-safe; one per answer. Pieces returned by :meth:`feed` and :meth:`finish` concatenate to the
    answer as written, less the dropped sentences (each with the spacing before it) and the dropped tail.
    """

    def __init__(self, max_sentences: int, lang: str = "en-us") -> None:
        """``max_sentences``: the most sentences passed on; ``lang``: whose abbreviations and marks decide
        where a sentence ends (any code :func:`koe.languages.language` accepts).

        Raises:
            ConfigError: an unknown ``lang``.
        """
        rules = rules_for(lang)
        self._scanner = Scanner(rules.abbreviations, rules.inverted_marks)
        self._max = max_sentences
        self._start = 0  # absolute offset where the sentence being written begins (after the last one)
        self._sent = 0  # absolute offset up to which the text was passed on
        self._spaced = False  # what was passed on ends in spacing
        self._said: set[str] = set()
        self._passed = 0  # sentences passed on
        self.dropped = 0  #: sentences dropped as repeats of earlier ones

    @property
    def full(self) -> bool:
        """The sentence limit is reached: nothing more will be passed on, so the LLM can be stopped."""
        return self._passed >= self._max

    def feed(self, delta: str) -> str:
        """Take the next delta; return the sentences it completed (possibly ``""``)."""
        if self.full:
            return ""
        self._scanner.feed(delta)
        out = [self._complete(final=False)]
        if self._passed == 0:  # the first sentence, still being written: passed on as it comes
            self._pass(out, self._scanner.text(self._sent, self._scanner.end), self._scanner.end)
        return "".join(out)

    def finish(self) -> str:
        """The stream ended: the sentences still held, and the tail only if it is the first sentence."""
        if self.full:
            return ""
        out = self._complete(final=True)
        tail = self._scanner.text(max(self._start, self._sent), self._scanner.end)
        self._start = self._sent = self._scanner.end
        if self._passed == 0 and _words(tail):
            self._passed = 1
            return out + tail
        return out

    def _complete(self, *, final: bool) -> str:
        out: list[str] = []
        for boundary in self._scanner.scan(final):
            if boundary.kind < Kind.SENTENCE or self.full:
                continue
            piece = self._scanner.text(self._start, boundary.end)
            words = _words(piece)
            if not words:
                continue  # a line break or an emoji alone: it goes with the next sentence
            start, self._start = self._start, boundary.end
            begun = self._sent > start and bool(_words(self._scanner.text(start, self._sent)))
            if words in self._said and not begun:  # a sentence already partly passed on is finished
                self.dropped += 1
                continue
            self._said.add(words)
            self._passed += 1
            # the spacing after the sentence goes with it: it is what proves the end to the TTS's own
            # segmenter, which would otherwise wait for the next sentence before speaking this one
            after = self._scanner.text(boundary.end, self._scanner.end)
            proven = boundary.end + len(after) - len(after.lstrip())
            if proven > self._sent:
                piece = self._scanner.text(max(start, self._sent), proven)
                if self._sent <= start and self._spaced:  # after a dropped sentence: its spacing is out
                    piece = piece.lstrip()
                self._pass(out, piece, proven)
        self._scanner.release(self._start)
        return "".join(out)

    def _pass(self, out: list[str], piece: str, upto: int) -> None:
        """Pass ``piece`` on, the text up to offset ``upto`` being now passed on."""
        if piece:
            out.append(piece)
            self._spaced = piece[-1].isspace()
        self._sent = upto
