"""One segment's phonemes through the engine: the plan :meth:`koe.pipeline.speech.Speech.phonemize_words`
gives (:class:`PhonemePiece`), decoded step by step (:meth:`SegmentDecode.open`), or in two halves around an
engine call shared with other segments (:meth:`SegmentDecode.requests`, :meth:`SegmentDecode.complete`; see
:mod:`koe.pipeline.batch`); each piece's silent edges trimmed at the joins (:mod:`koe.pipeline.seams`) and
its words timed from the segment's first sample.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from koe.engine.base import BufferedAudio, StreamEvent, SynthesisRequest, Utterance, UtteranceStream
from koe.engine.timing import SegmentTiming, WordSpan, WordTiming
from koe.pipeline.seams import ONSET_QUIET_S, SEGMENT_END_QUIET_S, Trim, quiet_end, quiet_start, trim
from koe.pipeline.voice import Voice
from koe.types import SAMPLE_RATE, Audio

if TYPE_CHECKING:  # the facade opens a decode: imported here for its type only
    from koe.pipeline.speech import Speech


@dataclass(frozen=True, slots=True)
class PhonemePiece:
    """One engine request's phonemes and the words spoken in it (phoneme spans relative to this piece,
    text spans in the text given to :meth:`koe.pipeline.speech.Speech.phonemize_words`); or, with
    ``pause_s``, a pause the text asked for: no phonemes, no words, no engine request."""

    phonemes: str
    words: tuple[WordSpan, ...]
    pause_s: float = 0.0


class _Words:
    """A segment's timed words, piece after piece: each piece's words shifted by the pieces before it."""

    def __init__(self) -> None:
        self.timed: list[WordTiming] = []
        self._samples = 0

    def add(self, piece: PhonemePiece, timing: SegmentTiming, kept: Trim) -> None:
        """The piece's words, its audio kept as ``kept`` says (its silent edges trimmed)."""
        offset_s = self._samples / SAMPLE_RATE - kept.start_s
        self.timed += (
            WordTiming(w.text_start, w.text_end, w.start_s + offset_s, w.end_s + offset_s)
            for w in timing.words(piece.words)
        )
        self._samples += kept.samples

    def pause(self, samples: int) -> None:
        """A pause of ``samples``: no words, the later ones that much later."""
        self._samples += samples


class _Spent:
    """The stream of a piece decoded already (its audio is the piece's pending audio): nothing is left."""

    @property
    def done(self) -> bool:
        return True

    def next_cost_s(self) -> float:
        return 0.0

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        raise StopIteration


_EMPTY = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class _Decoded:
    """A phoneme piece's engine answer: its timing (None: the engine gives none) and all its audio."""

    piece: PhonemePiece
    timing: SegmentTiming | None
    audio: Audio


#: A piece's answer, what of it is kept (its trim, None without a timing) and that audio.
_Kept = tuple[_Decoded, Trim | None, Audio]


def _laid_out(decoded: Sequence[_Decoded | float], opening: bool) -> tuple[list[WordTiming], list[Audio]]:
    """A whole segment's words and audio from its pieces' answers, each trimmed at the joins
    (:mod:`koe.pipeline.seams`), and each pause (a float, seconds) as silence that puts that much time
    between the sounds around it: the quiet the piece before it ends with and the piece after it starts
    with is cut, and past the segment's edge the other segment's is counted (none before a turn's
    ``opening`` segment)."""
    kept: list[_Kept | float] = []
    for answer in decoded:
        if isinstance(answer, float):
            if kept and isinstance(kept[-1], float):
                kept[-1] += answer  # pauses in a row are one pause
            else:
                kept.append(answer)
        elif answer.timing is None:
            kept.append((answer, None, answer.audio))
        else:
            trimmed = trim(answer.timing)
            kept.append((answer, trimmed, trimmed.apply(answer.audio, 0)))
    silences: dict[int, Audio] = {}
    for index, pause in enumerate(kept):
        if not isinstance(pause, float):
            continue
        before = kept[index - 1] if index else None
        after = kept[index + 1] if index + 1 < len(kept) else None
        left = round(pause * SAMPLE_RATE)
        if isinstance(before, tuple):
            kept[index - 1] = _cut(before, 0, quiet_end(before[2]))
        elif not opening:
            left -= round(SEGMENT_END_QUIET_S * SAMPLE_RATE)
        if isinstance(after, tuple):
            kept[index + 1] = _cut(after, quiet_start(after[2]), 0)
        else:
            left -= round(ONSET_QUIET_S * SAMPLE_RATE)
        silences[index] = np.zeros(max(0, left), dtype=np.float32)
    words = _Words()
    parts: list[Audio] = []
    for index, entry in enumerate(kept):
        if isinstance(entry, float):
            words.pause(silences[index].size)
            parts.append(silences[index])
            continue
        said, cut, audio = entry
        if said.timing is not None and cut is not None:
            words.add(said.piece, said.timing, cut)
        parts.append(audio)
    return words.timed, [part for part in parts if part.size]


def _cut(item: _Kept, start: int, end: int) -> _Kept:
    """``item`` with ``start`` more samples cut from its audio's start and ``end`` from its end."""
    answer, kept, audio = item
    audio = audio[start : audio.size - end]
    return answer, None if kept is None else Trim(kept.start + start, kept.start + start + audio.size), audio


@dataclass(slots=True)
class _Piece:
    stream: UtteranceStream
    pending: deque[Audio]  # audio its stream produced while it was being opened (engines without timing)
    trim: Trim | None  # what of it is kept at the joins (None: the engine gives no timing to tell)
    position: int = 0  # samples of the stream's audio seen so far

    def kept(self, audio: Audio) -> Audio:
        """``audio``, the stream's next samples, less what the joins trim."""
        offset, self.position = self.position, self.position + audio.size
        return audio if self.trim is None else self.trim.apply(audio, offset)


class SegmentDecode:
    """One segment's text through G2P and the engine, as bounded steps run in a worker thread.

    :meth:`open` does G2P and each phoneme piece's first step — with timings, that is all of the segment's
    words — then :meth:`next_audio` returns the audio: all of it at once, or with ``windowed`` one bounded
    piece per call (the engine's windows, sized from ``buffered_s``) until :attr:`done`. Each piece's
    silent edges are trimmed to what a pause lasts inside one utterance (:mod:`koe.pipeline.seams`), so
    segments join as whole-text synthesis would. Once ``cancel`` is set no step decodes anything more. Not
    thread-safe: one caller at a time.
    """

    def __init__(
        self,
        speech: Speech,
        text: str,
        voice: Voice,
        windowed: bool,
        buffered_s: BufferedAudio | None,
        cancel: threading.Event | None,
        opening: bool = False,
    ) -> None:
        self._speech = speech
        #: a windowed opening keeps its first piece's leading silence (koe.pipeline.seams)
        self._keep_lead = windowed and opening
        self._opening = opening
        self._text = text
        self._voice = voice
        self._windowed = windowed
        self._buffered_s = buffered_s
        self._cancel = cancel
        self._pieces: deque[_Piece] | None = None
        self._planned: list[PhonemePiece] = []
        #: after :meth:`open`: the leading samples kept only to cover the first window's decoding (a
        #: windowed opening's lead, less what any utterance keeps of it); 0 when none were
        self.lead_samples = 0

    @property
    def done(self) -> bool:
        """Opened, and no audio is left."""
        return self._pieces is not None and not self._pieces

    def next_cost_s(self) -> float:
        """Predicted seconds of work of the next :meth:`next_audio`."""
        return self._pieces[0].stream.next_cost_s() if self._pieces else 0.0

    def open(self) -> list[WordTiming]:
        """G2P and every piece's timing: the segment's words, seconds from its first sample (empty when the
        engine gives no timings). A segment with a pause is decoded whole here (see :meth:`_open_paused`)."""
        engine = self._speech.engine
        self._pieces = deque()
        words = _Words()
        planned = self._speech.phonemize_words(
            self._text, self._voice.lang, self._cancel, self._voice.lexicon
        )
        if any(piece.pause_s for piece in planned):
            return self._open_paused(planned)
        for piece in planned:
            stream = engine.stream(
                self._request(piece),
                windowed=self._windowed,
                buffered_s=self._buffered_s,
                cancel=self._cancel,
            )
            first = next(stream, None)
            if first is None:  # nothing the model can say, or cancelled
                continue
            pending: deque[Audio] = deque()
            kept: Trim | None = None
            if isinstance(first, SegmentTiming):
                windows = first.frames >= engine.capabilities.min_windowed_frames
                kept = trim(first, keep_lead=self._keep_lead and windows and not self._pieces)
                if not self._pieces:
                    self.lead_samples = trim(first).start - kept.start
                words.add(piece, first, kept)
            else:
                pending.append(first.audio)
            self._pieces.append(_Piece(stream, pending, kept))
        return words.timed

    def _open_paused(self, planned: list[PhonemePiece]) -> list[WordTiming]:
        """A segment with a pause, decoded whole now: a pause is measured from sound to sound, and how much
        quiet the words around it end and start with is known only from their audio (a last phoneme fades
        long before its duration ends), while the words' timings, sent first, depend on it."""
        self._windowed = False
        decoded: list[_Decoded | float] = []
        for piece in planned:
            if piece.pause_s:
                decoded.append(piece.pause_s)
                continue
            timing: SegmentTiming | None = None
            audio: list[Audio] = []
            for event in self._speech.engine.stream(self._request(piece), cancel=self._cancel):
                if isinstance(event, SegmentTiming):
                    timing = event
                else:
                    audio.append(event.audio)
            decoded.append(_Decoded(piece, timing, np.concatenate(audio) if audio else _EMPTY))
        if self._cancel is not None and self._cancel.is_set():
            return []
        words, parts = _laid_out(decoded, opening=self._opening)
        self._pieces = deque([_Piece(_Spent(), deque(parts), None)])
        return words

    def requests(self) -> list[SynthesisRequest]:
        """G2P only: the engine requests of the whole segment (one per phoneme piece), for an engine call
        shared with other segments; :meth:`complete` takes that call's results."""
        self._planned = self._speech.phonemize_words(
            self._text, self._voice.lang, self._cancel, self._voice.lexicon
        )
        return [self._request(piece) for piece in self._planned if not piece.pause_s]

    def complete(self, utterances: Sequence[Utterance]) -> tuple[list[WordTiming], Audio]:
        """The segment's words and audio from the engine's answers to :meth:`requests`, in their order."""
        self._pieces = deque()  # decoded: nothing is left to step through
        answers = iter(utterances)
        decoded: list[_Decoded | float] = []
        for piece in self._planned:
            if piece.pause_s:
                decoded.append(piece.pause_s)
            else:
                utterance = next(answers)
                decoded.append(_Decoded(piece, utterance.timing, utterance.audio))
        words, parts = _laid_out(decoded, opening=self._opening)
        audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        return words, audio

    def _request(self, piece: PhonemePiece) -> SynthesisRequest:
        return SynthesisRequest(piece.phonemes, self._voice.style, self._voice.speed)

    def next_audio(self) -> Audio:
        """The next audio (blocking): the rest of the segment, or with ``windowed`` one step of it; empty
        when cancelled."""
        assert self._pieces is not None, "open() first"
        parts: list[Audio] = []
        while self._pieces and not (self._windowed and parts):
            head = self._pieces[0]
            if head.pending:
                parts.append(head.pending.popleft())
                continue
            event = next(head.stream, None)
            if event is None:  # the piece is spoken, or cancelled
                self._pieces.popleft()
            elif not isinstance(event, SegmentTiming):  # a piece's timing is its first event only
                audio = head.kept(event.audio)
                if audio.size:
                    parts.append(audio)
        while self._pieces and self._pieces[0].stream.done and not self._pieces[0].pending:
            self._pieces.popleft()  # so that the caller knows this was the last step
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
