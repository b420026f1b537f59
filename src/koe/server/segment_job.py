"""One segment's synthesis in worker threads, whole or as a chain of one-window steps, and its parts.

A :class:`SegmentJob` is what the scheduler runs for a segment: G2P, then the engine's stream
(:mod:`koe.engine.streaming`). Each :meth:`SegmentJob.step` returns one :class:`Synthesized` part. Whole,
the first step is the segment, exactly as one job always was. Windowed, every step is bounded (stage A,
the leading silence, or one vocoder window), so the caller can queue each as its own job by deadline.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from koe.engine.base import SynthesisRequest
from koe.engine.onnx import OnnxEngine
from koe.engine.streaming import BufferedAudio, StreamingDecoder, stream
from koe.engine.streaming import SegmentStream as EngineStream
from koe.engine.timing import SegmentTiming
from koe.server.words import SpokenWord, written_words
from koe.speech import Speech
from koe.text.segment import Segment
from koe.types import SAMPLE_RATE, Audio, StyleTable


@dataclass(frozen=True, slots=True)
class Voice:
    """A resolved voice for one turn: the style table is looked up once, not per segment."""

    spec: str
    style: StyleTable
    lang: str
    speed: float


def resolve_voice(speech: Speech, spec: str, speed: float, lang: str | None) -> Voice:
    """Raises ``VoiceError`` (listing the valid names) for an unknown voice or a malformed blend."""
    return Voice(spec, speech.voices.resolve(spec), lang or speech.voices.lang_of(spec), speed)


@dataclass(frozen=True, slots=True)
class Synthesized:
    """One part of a segment's audio, in order: the whole segment (one part, first and last), or with
    windowed decoding a piece of it as soon as it is decoded.

    Attributes:
        segment: the segment the part belongs to.
        audio: the part's samples.
        took_s: synthesis time of the segment up to the end of this part: at the last part, the segment's.
        words: the segment's words, with its first part (seconds from the segment's first sample; empty
            when the engine gives no timings).
        start: the part's first sample within its segment.
        last: no part of the segment follows. A part before the last always has audio.
    """

    segment: Segment
    audio: Audio
    took_s: float
    words: tuple[SpokenWord, ...] = ()
    start: int = 0
    last: bool = True

    @property
    def first(self) -> bool:
        return self.start == 0

    @property
    def end_s(self) -> float:
        """Where the part ends in its segment: at the last part, the segment's duration."""
        return (self.start + self.audio.size) / SAMPLE_RATE


def window_decoder(speech: Speech) -> StreamingDecoder | None:
    """The engine's stage cut, which can window any segment whatever the engine's default (the server
    asks per segment): none for the PyTorch engine or a graph that could not be cut."""
    return speech.engine.streaming if isinstance(speech.engine, OnnxEngine) else None


class SegmentJob:
    """One segment's G2P and inference, as steps run in worker threads one at a time (a chain of jobs).

    Whole (``buffered_s`` is ``None``, or the engine cannot window), the first step does everything, as
    one job always did. Windowed, the first step does G2P, stage A of every phoneme piece (so all of the
    segment's words come with its first part) and the first audio, the leading silence; every later step
    decodes one window of the current piece. Once ``cancel`` is set, no step decodes anything more.
    """

    def __init__(
        self,
        speech: Speech,
        segment: Segment,
        voice: Voice,
        cancel: threading.Event,
        buffered_s: BufferedAudio | None,
    ) -> None:
        self._segment = segment
        self._speech = speech
        self._voice = voice
        self._cancel = cancel
        self._buffered_s = buffered_s
        self._decoder = window_decoder(speech) if buffered_s is not None else None
        self._pieces: deque[EngineStream] | None = None  # the pieces' streams, once opened
        self._produced = 0  # samples of the parts so far
        self._took_s = 0.0

    def step(self) -> Synthesized:
        """The segment's next part (blocking)."""
        started = time.perf_counter()
        if self._decoder is None:
            audio, words = self._whole()
        else:
            audio, words = self._next_window(self._decoder)
        self._took_s += time.perf_counter() - started
        last = self._decoder is None or not self._pieces
        part = Synthesized(self._segment, audio, self._took_s, words, self._produced, last)
        self._produced += audio.size
        return part

    def next_cost_s(self) -> float:
        """Predicted seconds of work of the next step (after the first)."""
        return self._pieces[0].next_cost_s() if self._pieces else 0.0

    def _whole(self) -> tuple[Audio, tuple[SpokenWord, ...]]:
        audio: list[Audio] = []
        words: list[SpokenWord] = []
        samples = 0
        for piece in self._speech.phonemize_words(self._segment.spoken_text, self._voice.lang):
            request = SynthesisRequest(piece.phonemes, self._voice.style, self._voice.speed)
            for event in stream(self._speech.engine, request, cancel=self._cancel):
                if isinstance(event, SegmentTiming):
                    words += written_words(self._segment, event.words(piece.words), samples / SAMPLE_RATE)
                else:
                    audio.append(event.audio)
            samples = sum(len(a) for a in audio)
        whole = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
        return whole, tuple(words)

    def _next_window(self, decoder: StreamingDecoder) -> tuple[Audio, tuple[SpokenWord, ...]]:
        words = self._open(decoder) if self._pieces is None else ()
        assert self._pieces is not None  # opened above
        audio: Audio | None = None
        while self._pieces and audio is None:
            event = next(self._pieces[0], None)
            if event is None:  # the piece is spoken, or cancelled
                self._pieces.popleft()
            else:
                assert not isinstance(event, SegmentTiming)  # a piece's timing is its first event only
                audio = event.audio
        if self._pieces and self._pieces[0].done:
            self._pieces.popleft()  # so that this part knows it is the last
        return (audio if audio is not None else np.zeros(0, dtype=np.float32)), words

    def _open(self, decoder: StreamingDecoder) -> tuple[SpokenWord, ...]:
        """G2P, then stage A of every piece: the segment's words, each piece timed from its first sample."""
        self._pieces = deque()
        words: list[SpokenWord] = []
        samples = 0
        for piece in self._speech.phonemize_words(self._segment.spoken_text, self._voice.lang):
            request = SynthesisRequest(piece.phonemes, self._voice.style, self._voice.speed)
            steps = decoder.stream(request, buffered_s=self._buffered_s, cancel=self._cancel, windowed=True)
            timing = next(steps, None)
            if timing is None:  # nothing the model can say, or cancelled
                continue
            assert isinstance(timing, SegmentTiming)  # stage A is every stream's first step
            words += written_words(self._segment, timing.words(piece.words), samples / SAMPLE_RATE)
            samples += timing.samples
            self._pieces.append(steps)
        return tuple(words)
