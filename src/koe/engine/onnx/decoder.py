"""Streaming synthesis of one utterance: timing and leading silence at once, then audio window by window.

:meth:`StreamingDecoder.stream` returns an :class:`OnnxStream`, an iterator whose every ``next()`` does
one bounded piece of work — stage A (→ :class:`SegmentTiming`), the leading pad as zeros (→ the first
:class:`AudioChunk`, no inference), then one vocoder window per step. So a scheduler can interleave steps of
many segments by playback deadline, a cancelled segment costs at most the window in progress (nothing
more with a :class:`~koe.engine.base.Cancel`, which stops that run too), and the
chunks concatenate to exactly ``timing.samples`` samples. Without the voice's calibration the segment is
decoded whole in one step (bit-identical to the single graph) while calibration runs in the background,
and so is a segment shorter than ``MIN_WINDOWED_FRAMES``.

Windowing is asked for per utterance (``windowed=True``; the server's ``Settings.windowed``, off by
default: it failed the quality gate on held-out sentences, docs/engine.md, "Streaming decoder"). Without it
a stream is timing right after stage A, then the whole utterance, bit-identical to
:meth:`OnnxEngine.synthesize` — word timings at no extra cost — unless the engine bounds a whole decode
(``whole_decode_max_frames``): a longer segment of a calibrated voice is then decoded in windows of at most
that many frames, still in one step, so that what one run holds stays bounded (its audio is the windowed
decode's, with estimated statistics).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from koe.engine.base import AudioChunk, BufferedAudio, StreamEvent, SynthesisRequest
from koe.engine.onnx.calibration import Calibration
from koe.engine.onnx.costs import DecodeCosts
from koe.engine.onnx.moments import quiet_fraction
from koe.engine.onnx.stages import (
    FloatArray,
    Front,
    Stages,
    StageSessions,
    Statistics,
    WholeDecode,
    load_stages,
    stoppable,
)
from koe.engine.onnx.verdict import Verdict
from koe.engine.onnx.windowing import (
    CROSSFADE_SAMPLES,
    LEAD_CONTEXT_FRAMES,
    LEAD_DECODED_FRAMES,
    MIN_WINDOWED_FRAMES,
    crossfade,
    input_span,
    next_window_end,
)
from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.engine.vocab import tokenize
from koe.errors import SynthesisError
from koe.machine import Measured
from koe.scheduler.cost import LinearCost
from koe.types import SAMPLE_RATE, Audio

logger = logging.getLogger(__name__)


class StreamingDecoder:
    """Verified stages, per-voice calibration and the costs of its steps: what windowed decoding needs."""

    def __init__(
        self,
        stages: Stages,
        calibration: Calibration,
        costs: DecodeCosts,
        whole_decode_max_frames: int | None = None,
    ) -> None:
        self.stages = stages
        self.calibration = calibration
        self.costs = costs
        #: the longest segment one vocoder run decodes when windows are not asked for (None: no limit)
        self.whole_decode_max_frames = whole_decode_max_frames

    @property
    def cost(self) -> LinearCost:
        """The vocoder window's cost model (fitted on first use)."""
        return self.costs.window

    @property
    def front_s_per_token(self) -> float:
        return self.costs.front_s_per_token

    @classmethod
    def load(
        cls,
        proto: onnx.ModelProto,
        model: bytes,
        sessions: StageSessions,
        token_input: str,
        whole: WholeDecode,
        model_sha256: str,
        cache_directory: Path,
        verdict: Verdict | None,
        measured_costs: Measured | None = None,
        whole_decode_max_frames: int | None = None,
    ) -> StreamingDecoder | None:
        """Derive the stages and prove the cut on the probe, unless ``verdict`` says it was proven before;
        ``None`` (logged) when the graph cannot be cut, so the engine decodes whole utterances.
        Calibrations are kept in ``cache_directory``, the decoding steps' costs in ``measured_costs``;
        ``whole_decode_max_frames``: :attr:`whole_decode_max_frames`."""
        probe_style: FloatArray = np.random.default_rng(0).standard_normal((1, 256)).astype(
            np.float32
        ) * np.float32(0.2)  # any style proves the cut; a fixed one keeps the check reproducible
        loaded = load_stages(proto, model, sessions, token_input, whole, probe_style, verdict)
        if loaded is None:
            return None
        stages, probe = loaded
        calibration = Calibration(stages, model_sha256, cache_directory)
        costs = DecodeCosts(stages, probe, probe_style, measured_costs)
        return cls(stages, calibration, costs, whole_decode_max_frames)

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
        window_frames: int | None = None,
    ) -> OnnxStream:
        """A lazy stream of one utterance's timing and audio; nothing runs until the first ``next()``.

        With ``windowed``, windows are sized from ``buffered_s`` (the listener's queued audio), or fixed at
        ``window_frames`` (quality tests, fixed work units); one of the two is required. Setting ``cancel``
        ends the stream before its next window. Raises ``SynthesisError`` for phonemes the model cannot take
        (at once) or a failed inference (from ``next()``), ``ValueError`` for windows nobody can size.
        """
        if windowed and buffered_s is None and window_frames is None:
            raise ValueError("windowed decoding needs buffered_s or window_frames to size its windows")
        return OnnxStream(self, request, buffered_s, cancel, window_frames, windowed)


class OnnxStream(Iterator[StreamEvent]):
    """One utterance in progress (an :class:`~koe.engine.base.UtteranceStream`)."""

    def __init__(
        self,
        decoder: StreamingDecoder,
        request: SynthesisRequest,
        buffered_s: BufferedAudio | None,
        cancel: threading.Event | None,
        window_frames: int | None,
        windowed: bool,
    ) -> None:
        self._decoder = decoder
        self._window_frames = window_frames
        self._windowed = windowed
        self._request = request
        self._ids = tokenize(request.phonemes)
        self._buffered_s = buffered_s
        self._cancel = cancel
        self._options = stoppable(cancel)
        self._row = request.style[len(self._ids) - 1] if self._ids else None
        self._front: Front | None = None
        self._statistics: Statistics | None = None
        self.timing: SegmentTiming | None = None
        self._position = 0  # next output frame
        self._lead_sent = False
        self._tail = np.zeros(0, dtype=np.float32)
        self._emitted = 0  # samples yielded
        self._previous = 0  # frames of the last window
        self.windows = 0

    @property
    def done(self) -> bool:
        return not self._ids or (self._front is not None and self._position >= self._front.frames)

    def next_cost_s(self) -> float:
        if self.done:
            return 0.0
        if self._front is None:
            return self._decoder.front_s_per_token * len(self._ids)
        if self._statistics is None:
            return self._decoder.cost.predict(self._front.frames)
        if not self._lead_sent:
            return 0.0
        low, high = input_span(self._position, self._next_end(), self._front.frames, left=self._left())
        return self._decoder.cost.predict(high - low)

    def _left(self) -> int | None:
        """The next window's left context: the first one's lies in the silent leading pad."""
        return LEAD_CONTEXT_FRAMES if not self.windows else None

    def _next_end(self) -> int:
        assert self._front is not None
        total = self._front.frames
        if self._window_frames is not None:
            return min(total, self._position + self._window_frames)
        assert self._buffered_s is not None  # required with windows unless window_frames is given
        cost = self._decoder.cost
        buffered_s = self._buffered_s()
        return next_window_end(
            self._position, total, buffered_s, cost, previous=self._previous, left=self._left(),
            first=self._opening(buffered_s),
        )  # fmt: skip

    def _opening(self, buffered_s: float) -> bool:
        """Whether the next window may run past what is on time: only the first window, and only while the
        listener has nothing queued beyond this stream's own leading silence (a turn's opening: nothing
        plays yet that could run out). A later segment's first window, with earlier audio still playing, is
        sized like every other window, since running late there is a pause after speech began."""
        return not self.windows and round(buffered_s * SAMPLE_RATE) <= self._emitted

    def __next__(self) -> StreamEvent:
        if self.done or self._cancelled():
            raise StopIteration
        try:
            return self._step()
        except SynthesisError:
            if self._cancelled():  # the cancel stopped the run in progress
                raise StopIteration from None
            raise

    def _cancelled(self) -> bool:
        return self._cancel is not None and self._cancel.is_set()

    def _step(self) -> StreamEvent:
        if self._front is None:
            return self._run_front()
        if self._statistics is None:
            return self._emit(self._whole())
        if not self._lead_sent:
            self._skip_lead()
            if self._position:
                return self._emit(np.zeros(self._position * FRAME_SAMPLES, dtype=np.float32))
        return self._emit(self._window())

    def _run_front(self) -> SegmentTiming:
        assert self._row is not None  # done() is True without tokens
        self._front = self._decoder.stages.run_front(self._ids, self._row, self._request.speed, self._options)
        if self._windowed and self._front.frames >= MIN_WINDOWED_FRAMES:
            self._statistics = self._estimated_statistics()
        self.timing = SegmentTiming(self._request.phonemes, self._front.durations)
        return self.timing

    def _whole(self) -> Audio:
        assert self._front is not None and self._row is not None
        limit = self._decoder.whole_decode_max_frames
        if limit is not None and self._front.frames > limit:
            windows = self._in_windows(limit)
            if windows is not None:
                return windows
        audio, statistics = self._decoder.stages.decode(self._front, self._row, self._options)
        self._decoder.costs.offer(self._front, self._row, statistics)
        self._position = self._front.frames
        return audio

    def _in_windows(self, limit: int) -> Audio | None:
        """The whole segment decoded in equal windows of at most ``limit`` frames, in one step:
        ``None`` while the voice is not calibrated (it is calibrated in the background meanwhile). Raises
        ``SynthesisError`` when cancelled between windows."""
        assert self._front is not None
        self._statistics = self._estimated_statistics()
        if self._statistics is None:
            return None
        self._skip_lead()
        left = self._front.frames - self._position
        self._window_frames = math.ceil(left / math.ceil(left / limit))  # no short last window
        parts = [np.zeros(self._position * FRAME_SAMPLES, dtype=np.float32)]
        while self._position < self._front.frames:
            if self._cancelled():
                raise SynthesisError(f"cancelled after {self.windows} windows")
            parts.append(self._window())
        return np.concatenate(parts)

    def _estimated_statistics(self) -> Statistics | None:
        """The segment's norm statistics estimated from its voice's calibration; ``None`` while the voice is
        not calibrated (its calibration is started in the background)."""
        assert self._front is not None
        moments = self._decoder.calibration.lookup(self._request.style)
        if moments is None:
            self._decoder.calibration.calibrate_in_background(self._request.style)
            return None
        return moments.statistics(self._decoder.stages.norms, quiet_fraction(self._front.energy))

    def _skip_lead(self) -> None:
        """Start decoding where the leading pad's silence ends, less the lead-in the windows decode."""
        assert self._front is not None
        self._lead_sent = True
        self._position = max(self._front.durations[0].item() - LEAD_DECODED_FRAMES, 0)

    def _window(self) -> Audio:
        assert self._front is not None and self._row is not None and self._statistics is not None
        total = self._front.frames
        start = self._position
        end = self._next_end()
        low, high = input_span(start, end, total, left=self._left())
        started = time.perf_counter()
        decoded = self._decoder.stages.decode_window(
            self._front, self._row, self._statistics, low, high, self._options
        )
        self._decoder.cost.observe(high - low, time.perf_counter() - started)
        body = decoded[(start - low) * FRAME_SAMPLES : (end - low) * FRAME_SAMPLES]
        chunk = crossfade(self._tail, body)
        tail_end = min(decoded.size, (end - low) * FRAME_SAMPLES + CROSSFADE_SAMPLES)
        self._tail = decoded[(end - low) * FRAME_SAMPLES : tail_end].copy() if end < total else self._tail[:0]
        self._position = end
        self._previous = end - start
        self.windows += 1
        return chunk

    def _emit(self, audio: Audio) -> AudioChunk:
        chunk = AudioChunk(audio, self._emitted)
        self._emitted += audio.size
        return chunk
