"""The engine interface every backend implements: phonemes + style + speed → 24 kHz float32 audio.

The engine is language-blind (it never sees text); G2P and chunking happen upstream in :mod:`koe.g2p`.
What a backend can do beyond whole utterances — time its tokens, decode window by window, share one pass
among several utterances — is stated in its :class:`Capabilities`, so callers ask, never test its type.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from koe.engine.timing import SegmentTiming
from koe.types import Audio, StyleTable

#: Seconds of audio the listener has queued and not yet played, including every chunk already produced.
BufferedAudio = Callable[[], float]


class Cancel(threading.Event):
    """A cancel flag that also stops the engine run in progress, where the backend can (ONNX Runtime's
    terminate flag): a cancelled decode frees the cores within a node of the graph, not at its end. A plain
    ``threading.Event`` still cancels, between steps. Thread-safe."""

    def __init__(self) -> None:
        super().__init__()
        self._stops: list[Callable[[], None]] = []
        self._stops_lock = threading.Lock()

    def set(self) -> None:
        with self._stops_lock:
            super().set()
            stops, self._stops = self._stops, []
        for stop in stops:
            stop()

    def on_set(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` once this is set: at once if it is."""
        with self._stops_lock:
            if not self.is_set():
                self._stops.append(stop)
                return
        stop()


@dataclass(frozen=True, slots=True)
class SynthesisRequest:
    """One utterance for the engine; ``phonemes`` holds at most ``vocab.MAX_PHONEME_TOKENS`` symbols."""

    phonemes: str
    style: StyleTable
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a loaded backend offers beyond :meth:`Engine.synthesize`.

    Attributes:
        word_timings: its streams start with a :class:`SegmentTiming` (per-token durations).
        windowed: ``stream(windowed=True)`` decodes window by window (else it decodes whole).
        max_batch: utterances one :meth:`Engine.synthesize_batch` call can share a pass for (1: none).
        min_windowed_frames: with ``windowed``, an utterance shorter than this still decodes whole.
    """

    word_timings: bool = False
    windowed: bool = False
    max_batch: int = 1
    min_windowed_frames: int = 0


@dataclass(frozen=True, slots=True)
class Utterance:
    """One request's result from :meth:`Engine.synthesize_batch`: its audio and, where the backend times
    its tokens (``capabilities.word_timings``), its timing; empty audio when it was cancelled."""

    audio: Audio
    timing: SegmentTiming | None = None


#: Polled with an index into the batch; True means the caller no longer wants that request.
CancelCheck = Callable[[int], bool]


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """Samples ``[start, start + len(audio))`` of the utterance's audio (24 kHz float32)."""

    audio: Audio
    start: int

    @property
    def end(self) -> int:
        return self.start + self.audio.size


StreamEvent = SegmentTiming | AudioChunk


class UtteranceStream(Protocol):
    """One utterance in progress: each ``next()`` does one bounded piece of work and returns its event —
    the timing first (where the backend has it), then audio chunks that concatenate to the utterance.
    Setting the stream's cancel event ends it before its next step, and a :class:`Cancel` stops the step in
    progress too where the backend can (``next()`` then raises ``StopIteration``). ``next()`` may be called
    from any thread, but not concurrently."""

    @property
    def done(self) -> bool:
        """No audio is left to decode (or the utterance is empty)."""
        ...

    def next_cost_s(self) -> float:
        """Predicted seconds of work of the next ``next()`` (for schedulers)."""
        ...

    def __iter__(self) -> Iterator[StreamEvent]: ...

    def __next__(self) -> StreamEvent: ...


class Engine(Protocol):
    """A loaded Kokoro-82M backend. Implementations must be safe to call from one worker thread each."""

    name: str
    sample_rate: int
    capabilities: Capabilities
    #: what runs, for logs and reports: the backend, its device and which weights ("dequantized int8"...)
    description: str

    def synthesize(self, request: SynthesisRequest) -> Audio:
        """Synthesize one utterance. Raises ``SynthesisError`` for phonemes the model cannot take."""
        ...

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Utterance]:
        """Synthesize several utterances, each as :meth:`synthesize` would (with its timing where the
        backend has one); in shared passes where ``capabilities.max_batch`` allows. ``is_cancelled(i)``
        is polled between passes: a cancelled request's audio comes back empty. Raises ``SynthesisError``
        when any request fails: a batch fails as a whole (callers isolate the culprit by retrying alone)."""
        ...

    def prepare(self, style: StyleTable, cancel: threading.Event | None = None) -> bool:
        """Do now, blocking, the one-off work a voice needs before it streams at its best (the ONNX
        engine's windowed-decoding calibration, otherwise made in the background on first use, and the
        costs of its decoding steps, otherwise provisional). Returns False where the engine could not
        measure alone (other work ran meanwhile) or ``cancel`` was set: the costs stay provisional; ask
        again when it is idle."""
        ...

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
    ) -> UtteranceStream:
        """The utterance as a stream (see :class:`UtteranceStream`). ``windowed`` asks for window-by-window
        decoding, sized by ``buffered_s`` (required then); a backend without it decodes whole. Raises
        ``SynthesisError`` for phonemes the model cannot take, at once."""
        ...


class WholeStream:
    """An utterance decoded in one step: its timing (when ``timing`` is given), then all of its audio.

    For backends, or paths of a backend, that cannot decode in windows. Its one decoding step is priced by
    the caller's own model of a whole utterance, so :meth:`next_cost_s` has nothing to add.
    """

    def __init__(
        self,
        decode: Callable[[], Audio],
        cancel: threading.Event | None = None,
        timing: Callable[[], SegmentTiming] | None = None,
    ) -> None:
        self._decode = decode
        self._cancel = cancel
        self._timing = timing
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def next_cost_s(self) -> float:
        return 0.0

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        if self._done or (self._cancel is not None and self._cancel.is_set()):
            raise StopIteration
        if self._timing is not None:
            timing, self._timing = self._timing(), None
            return timing
        self._done = True
        audio = self._decode()
        if not audio.size:
            raise StopIteration
        return AudioChunk(np.ascontiguousarray(audio, dtype=np.float32), 0)


def drain(stream: UtteranceStream) -> Utterance:
    """A whole utterance from its stream: the timing it starts with (if any) and all of its audio — how a
    backend that cannot share passes answers :meth:`Engine.synthesize_batch`."""
    timing: SegmentTiming | None = None
    chunks: list[Audio] = []
    for event in stream:
        if isinstance(event, SegmentTiming):
            timing = event
        else:
            chunks.append(event.audio)
    audio = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return Utterance(audio, timing)
