"""One segment's synthesis in worker threads, whole or as a chain of one-window steps, and its parts.

A :class:`SegmentJob` is what the scheduler runs for a segment. Each :meth:`SegmentJob.step` returns one
:class:`Part`: whole, the first step is the whole segment; windowed, every step is bounded (G2P and stage
A with the leading silence, then one vocoder window), so the caller can queue each as its own job by
deadline. Whether a segment is windowed was decided once, where its stream was opened
(:meth:`koe.pipeline.synthesizer.Synthesizer.stream`). A whole segment can instead share one engine call
with segments of other sessions: :meth:`SegmentJob.prepare` then :meth:`SegmentJob.finish`
(:mod:`koe.pipeline.batch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from koe.engine.base import BufferedAudio, SynthesisRequest, Utterance
from koe.engine.timing import WordTiming
from koe.pipeline.speech import Speech
from koe.pipeline.voice import Voice
from koe.pipeline.words import written_words
from koe.text.segment import Segment
from koe.types import SAMPLE_RATE, Audio
from koe.wire.words import SpokenWord


@dataclass(frozen=True, slots=True)
class Part:
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
        cached: replayed from the segment cache (:mod:`koe.pipeline.cache`), not synthesized; its
            ``took_s`` is 0.
    """

    segment: Segment
    audio: Audio
    took_s: float
    words: tuple[SpokenWord, ...] = ()
    start: int = 0
    last: bool = True
    cached: bool = False

    @property
    def first(self) -> bool:
        return self.start == 0

    @property
    def end_s(self) -> float:
        """Where the part ends in its segment: at the last part, the segment's duration."""
        return (self.start + self.audio.size) / SAMPLE_RATE


class SegmentJob:
    """One segment's G2P and inference, as steps run in worker threads one at a time (a chain of jobs).

    Once ``cancel`` is set, no step decodes anything more. After the first step, :attr:`timings` holds the
    engine's word timings (spans in the segment's spoken text), which the segment cache keeps.
    """

    def __init__(
        self,
        speech: Speech,
        segment: Segment,
        voice: Voice,
        cancel: threading.Event,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
    ) -> None:
        self._segment = segment
        self._decode = speech.decode(
            segment.spoken_text,
            voice,
            windowed=windowed,
            buffered_s=buffered_s,
            cancel=cancel,
            opening=segment.is_first,
        )
        self._opened = False
        self.timings: tuple[WordTiming, ...] = ()
        self._produced = 0  # samples of the parts so far
        self._took_s = 0.0
        self.requests: list[SynthesisRequest] = []  # after prepare(): the segment's engine requests

    def step(self) -> Part:
        """The segment's next part (blocking)."""
        started = time.perf_counter()
        words: tuple[SpokenWord, ...] = ()
        if not self._opened:
            self._opened = True
            self.timings = tuple(self._decode.open())
            words = written_words(self._segment, self.timings)
        audio = self._decode.next_audio()
        self._took_s += time.perf_counter() - started
        part = Part(self._segment, audio, self._took_s, words, self._produced, self._decode.done)
        self._produced += audio.size
        return part

    @property
    def lead_samples(self) -> int:
        """After the first step: the leading samples of the segment's audio kept only to cover its first
        window's decoding (nothing plays before a windowed opening); 0 when none were."""
        return self._decode.lead_samples

    def next_cost_s(self) -> float:
        """Predicted seconds of work of the next step (after the first)."""
        return self._decode.next_cost_s()

    def prepare(self) -> None:
        """G2P of the whole segment (blocking), so that its engine requests can board a shared call."""
        started = time.perf_counter()
        self.requests = self._decode.requests()
        self._took_s = time.perf_counter() - started

    def finish(self, utterances: Sequence[Utterance], call_s: float) -> Part:
        """The whole segment as one part, from the shared call's answers to :attr:`requests`."""
        words, audio = self._decode.complete(utterances)
        self._opened = True
        return Part(self._segment, audio, self._took_s + call_s, written_words(self._segment, words))
