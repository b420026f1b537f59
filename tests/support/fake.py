"""A scripted stand-in for the model, so protocol, session, turn, scheduler and barge-in tests run in
milliseconds: a real :class:`~koe.pipeline.speech.Speech` whose engine and G2P are fakes.

* :class:`FakeG2P` spells each word's letters as phoneme symbols (every word is timed);
* :class:`FakeEngine` gives each phoneme token ``FRAMES_PER_TOKEN`` frames (divided by the speed) and
  the padding tokens one each, as Kokoro's durations do, and a deterministic tone whose pitch follows the
  token and whose level follows the voice's style, so speed, voice and text all change the audio. It
  times its tokens and decodes in windows like the ONNX engine, fails on demand (a word containing
  :data:`FAIL_WORD`), and can be slowed or held (``delay_s``, ``gate``) to make scheduling observable.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from koe.engine.base import (
    AudioChunk,
    BufferedAudio,
    Cancel,
    CancelCheck,
    Capabilities,
    StreamEvent,
    SynthesisRequest,
    Utterance,
    drain,
)
from koe.engine.onnx.windowing import MIN_WINDOWED_FRAMES
from koe.engine.timing import FRAME_SAMPLES, SegmentTiming, WordSpan
from koe.engine.vocab import tokenize, vocabulary
from koe.engine.voices import STYLE_ROWS, STYLE_WIDTH, VOICES, VoiceBank
from koe.errors import SynthesisError
from koe.languages import CODES
from koe.pipeline.speech import Speech
from koe.types import SAMPLE_RATE, Audio, StyleTable

#: Frames per phoneme token at speed 1 (50 ms): a word of five letters lasts a quarter of a second.
FRAMES_PER_TOKEN = 2
#: A word containing this makes the engine fail on its segment (``SynthesisError``).
FAIL_WORD = "kaboom"
#: Frames of one window when decoding in windows.
WINDOW_FRAMES = 8
_PUNCTUATION = '.,;:!?"()'


class FakeG2P:
    """Each word's letters, lower-cased, as phonemes ("g" as IPA "ɡ", a letter of another script as "a");
    punctuation the model knows stays."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        vocab = vocabulary()
        out = ""
        spans: list[WordSpan] = []
        for match in re.finditer(r"\S+", text):
            word_text = "".join("a" if c.isalpha() and c not in vocab else c for c in match.group().lower())
            symbols = "".join(c for c in word_text.replace("g", "ɡ") if c in vocab)
            letters = symbols.strip(_PUNCTUATION)
            if not letters:
                out += symbols
                continue
            if out:
                out += " "
            word = re.search(r"\w(?:.*\w)?", match.group())
            assert word is not None  # it has letters
            at = len(out) + symbols.index(letters)
            spans.append(
                WordSpan(match.start() + word.start(), match.start() + word.end(), at, at + len(letters))
            )
            out += symbols
        return out, spans


class FakeEngine:
    """Deterministic audio with real durations; see the module docstring."""

    name = "fake"
    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        gate: threading.Event | None = None,
        gate_after: int = 0,
        windowed: bool = True,
        max_batch: int = 1,
    ) -> None:
        """``gate``: calls after the first ``gate_after`` wait until it is set (a held worker);
        ``max_batch`` > 1 makes it an engine that shares passes (segments then share calls)."""
        self.capabilities = Capabilities(
            word_timings=True,
            windowed=windowed,
            max_batch=max_batch,
            min_windowed_frames=MIN_WINDOWED_FRAMES,
        )
        self.batches: list[int] = []  # requests per synthesize_batch call
        self.description = "fake (scripted tones)"
        self.delay_s = delay_s
        self.gate = gate
        self.gate_after = gate_after
        self.calls = 0
        self.stopped = 0  # held calls a Cancel stopped before the gate opened
        self.worked: list[str] = []  # the phonemes of each call, in order
        self.requests: list[SynthesisRequest] = []  # each call's request (its voice and speed), in order
        self._lock = threading.Lock()

    def durations(self, request: SynthesisRequest) -> np.ndarray:
        ids = tokenize(request.phonemes)
        per_token = max(1, round(FRAMES_PER_TOKEN / request.speed))
        return np.array([1, *([per_token] * len(ids)), 1], dtype=np.int64)

    def synthesize(self, request: SynthesisRequest) -> Audio:
        ids = tokenize(request.phonemes)
        if not ids:
            return np.zeros(0, dtype=np.float32)
        self.work(request)
        return self.audio(request, ids, 0, int(self.durations(request).sum()))

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Utterance]:
        """One call for all: it fails as a whole when any request fails, as a shared pass would."""
        with self._lock:
            self.batches.append(len(requests))
        return [
            Utterance(np.zeros(0, dtype=np.float32), None)
            if is_cancelled is not None and is_cancelled(index)
            else drain(self.stream(request))
            for index, request in enumerate(requests)
        ]

    def prepare(self, style: StyleTable, cancel: threading.Event | None = None) -> bool:
        """Nothing to calibrate or measure."""
        return True

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
    ) -> FakeStream:
        tokenize(request.phonemes)  # an over-long utterance fails now, as the real engines do
        return FakeStream(self, request, windowed and self.capabilities.windowed, buffered_s, cancel)

    def work(self, request: SynthesisRequest, cancel: threading.Event | None = None) -> bool:
        """One engine call's cost: counted, failing, held or slowed as scripted. A held call ends when a
        :class:`Cancel` is set, as the real engine's run in progress does: then it returns True."""
        with self._lock:
            self.calls += 1
            self.worked.append(request.phonemes)
            self.requests.append(request)
            call = self.calls
        if FAIL_WORD in request.phonemes:
            raise SynthesisError(f"the fake engine was told to fail on {FAIL_WORD!r}")
        if self.gate is not None and call > self.gate_after:
            deadline = time.monotonic() + 30
            while not self.gate.wait(0.01):
                if isinstance(cancel, Cancel) and cancel.is_set():
                    with self._lock:
                        self.stopped += 1
                    return True
                if time.monotonic() > deadline:
                    raise TimeoutError("the fake engine's gate was never opened")
        if self.delay_s:
            time.sleep(self.delay_s)
        return False

    def audio(self, request: SynthesisRequest, ids: list[int], start: int, end: int) -> Audio:
        """Frames ``[start, end)`` of the utterance: silence on the pads, one tone per token."""
        durations = self.durations(request)
        owners = np.repeat(np.arange(len(durations)), durations)[start:end]
        level = 0.1 + 0.4 * float(np.abs(request.style[len(ids) - 1]).mean())
        samples = np.arange(start * FRAME_SAMPLES, end * FRAME_SAMPLES, dtype=np.float64)
        pitch = np.array([0.0, *(200.0 + 10.0 * token for token in ids), 0.0])[owners]
        tone = level * np.sin(2 * np.pi * np.repeat(pitch, FRAME_SAMPLES) * samples / SAMPLE_RATE)
        return tone.astype(np.float32)


class FakeStream(Iterator[StreamEvent]):
    """The timing first, then the audio: whole, or :data:`WINDOW_FRAMES` frames a step (a segment the ONNX
    engine would find too short to window, whole)."""

    def __init__(
        self,
        engine: FakeEngine,
        request: SynthesisRequest,
        windowed: bool,
        buffered_s: BufferedAudio | None,
        cancel: threading.Event | None,
    ) -> None:
        self._engine = engine
        self._request = request
        self._ids = tokenize(request.phonemes)
        self._windowed = windowed
        self._buffered_s = buffered_s
        self._cancel = cancel
        self._frames = int(engine.durations(request).sum()) if self._ids else 0
        self._timed = False
        self._position = 0

    @property
    def done(self) -> bool:
        return not self._ids or (self._timed and self._position >= self._frames)

    def next_cost_s(self) -> float:
        return 0.0 if self.done else self._engine.delay_s

    def __next__(self) -> StreamEvent:
        if self.done or (self._cancel is not None and self._cancel.is_set()):
            raise StopIteration
        if not self._timed:
            self._timed = True
            return SegmentTiming(self._request.phonemes, self._engine.durations(self._request))
        if self._buffered_s is not None:
            self._buffered_s()  # read as the real decoder does (from a worker thread)
        windows = self._windowed and self._frames >= MIN_WINDOWED_FRAMES
        end = min(self._frames, self._position + WINDOW_FRAMES) if windows else self._frames
        if self._engine.work(self._request, self._cancel):
            raise StopIteration  # stopped in its run by the cancel
        audio = self._engine.audio(self._request, self._ids, self._position, end)
        chunk = AudioChunk(audio, self._position * FRAME_SAMPLES)
        self._position = end
        return chunk


def fake_voices() -> VoiceBank:
    """Every voice name (54), each a constant style table of its own level (a blend lies between)."""
    tables = {
        name: np.full((STYLE_ROWS, 1, STYLE_WIDTH), (index + 1) / len(VOICES), dtype=np.float32)
        for index, name in enumerate(VOICES)
    }
    return VoiceBank(tables)


def fake_speech(engine: FakeEngine | None = None) -> Speech:
    """A :class:`Speech` on the fake engine and G2P (every language), ready at once."""
    return Speech(engine or FakeEngine(), fake_voices(), {lang: FakeG2P(lang) for lang in CODES})


def fake_seconds(text: str, speed: float = 1.0) -> float:
    """How long the fake engine speaks ``text`` when it is one segment: its tokens' frames and the pads."""
    tokens = len(tokenize(FakeG2P("en-us").phonemize(text)))
    frames = tokens * max(1, round(FRAMES_PER_TOKEN / speed)) + 2
    return frames * FRAME_SAMPLES / SAMPLE_RATE
