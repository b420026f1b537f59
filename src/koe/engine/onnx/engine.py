"""Kokoro-82M's single ONNX graph through ONNX Runtime (CPU here; CUDA when onnxruntime-gpu is installed).

With the stage cut verified (:mod:`koe.engine.onnx.stages`) every stream times its tokens and may decode in
windows; without it (another export), streams decode whole utterances and carry no timing. Streams never use
the single graph's session, so once the cut is proven for a model (:mod:`koe.engine.onnx.verdict`) that
session is built only when :meth:`OnnxEngine.synthesize` is first called.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort

from koe.engine.assets import cache_dir
from koe.engine.base import (
    BufferedAudio,
    CancelCheck,
    Capabilities,
    SynthesisRequest,
    Utterance,
    UtteranceStream,
    WholeStream,
    drain,
)
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.dequantize import dequantized
from koe.engine.onnx.sessions import RELEASING, OptimizedSessions
from koe.engine.onnx.stages import PROBE_PHONEMES, parse
from koe.engine.onnx.verdict import Verdict, VerdictKey
from koe.engine.onnx.windowing import MIN_WINDOWED_FRAMES
from koe.engine.vocab import tokenize
from koe.errors import AssetError, SynthesisError
from koe.machine import MEASURED_DIR, Measured
from koe.types import SAMPLE_RATE, Audio, StyleTable

logger = logging.getLogger(__name__)

#: Input names differ between exports: kokoro-onnx's (``tokens``) and onnx-community's (``input_ids``).
_TOKEN_INPUTS = ("tokens", "input_ids")
_PAD = 0
_CPU_ONLY = ["CPUExecutionProvider"]


@dataclass(frozen=True, slots=True)
class OnnxOptions:
    """Session settings; defaults chosen by measurement on a 2-core CPU (docs/engine.md)."""

    threads: int | None = None  # intra-op threads; None = all cores
    graph_optimization: str = "all"  # "basic" | "extended" | "all"
    providers: tuple[str, ...] | None = None  # None = CUDA when available, else CPU
    streaming: bool = True  # derive the stage cut: word timings and windowed decoding (docs/engine.md)
    spin: bool = True  # intra-op threads spin between operators (OptimizedSessions)
    #: A segment with more frames than this, not windowed, decodes in windows of at most this many within
    #: one step (estimated statistics), so that one vocoder run holds at most ~0.4 MB per frame of it;
    #: None: every segment asked for whole is the single graph's decode (docs/operations.md, "Memory").
    whole_decode_max_frames: int | None = None
    #: On the CPU, the vocoder's convolutions run in float on weights dequantized at load: less CPU per
    #: audio second, more memory (koe.engine.onnx.dequantize; docs/engine.md, "Float convolutions").
    float_vocoder: bool = True


_OPT_LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def choose_providers(requested: tuple[str, ...] | None) -> list[str]:
    available = ort.get_available_providers()
    if requested is None:
        preferred = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        return [p for p in preferred if p in available]
    missing = [p for p in requested if p not in available]
    if missing:
        raise AssetError(f"ONNX Runtime providers {missing} are not available; available: {available}")
    return list(requested)


class OnnxEngine:
    """A loaded ONNX Runtime session. ``InferenceSession.run`` is thread-safe, so workers share one."""

    name = "onnx"
    sample_rate = SAMPLE_RATE

    def __init__(
        self, model: bytes, options: OnnxOptions | None = None, model_sha256: str | None = None
    ) -> None:
        """``model_sha256``: the bytes' sha256 where the caller has just verified it (the packaged model), so
        that 92 MB are not hashed twice; computed here otherwise."""
        options = options or OnnxOptions()
        threads = options.threads or os.cpu_count() or 1
        providers = choose_providers(options.providers)
        make_session = OptimizedSessions(
            threads,
            _OPT_LEVELS[options.graph_optimization],
            providers,
            cache_dir() / "optimized",
            spin=options.spin,
        )

        #: what names the model that runs wherever a derived artefact is kept (the stage cut's verdict, the
        #: kept graphs, calibrations): the rewritten model's identity when it is rewritten
        self.model_sha256 = model_sha256 or hashlib.sha256(model).hexdigest()
        rewritten = (
            dequantized(model, self.model_sha256, cache_dir() / "dequantized")
            if options.float_vocoder and providers == _CPU_ONLY
            else None
        )
        if rewritten is not None:
            model, self.model_sha256 = rewritten.model, rewritten.identity
        self.float_vocoder = rewritten is not None
        self._make_session = make_session
        self._model: bytes | None = model  # kept until the single graph's session is built from it
        self._whole: ort.InferenceSession | None = None
        #: the single graph is kept optimized only where it decodes everything: beside the stage cut it
        #: serves a first start's proof and rare calls, and writing its 92 MB would lengthen that start
        self._keep_whole = False
        self._whole_lock = threading.Lock()
        self.providers = providers
        try:
            proto: onnx.ModelProto | None = rewritten.proto if rewritten is not None else parse(model)
        except AssetError as exc:  # ONNX Runtime may still run it: then it decodes whole utterances
            logger.warning("%s", exc.message)
            proto = None
        inputs = (
            {value.name for value in proto.graph.input}
            if proto is not None
            else {value.name for value in self._session().get_inputs()}
        )
        token_inputs = [name for name in _TOKEN_INPUTS if name in inputs]
        if not token_inputs or not {"style", "speed"} <= inputs:
            raise AssetError(
                f"model inputs {sorted(inputs)} are not Kokoro's (tokens/input_ids, style, speed)"
            )
        self._token_input = token_inputs[0]
        logger.info("ONNX engine on %s, %d threads", providers, threads)
        self.streaming: StreamingDecoder | None = None
        if options.streaming and proto is not None:
            key = VerdictKey.of(
                self.model_sha256, providers, options.graph_optimization,
                threads, PROBE_PHONEMES,
            )  # fmt: skip
            self.streaming = StreamingDecoder.load(
                proto,
                model,
                make_session,
                self._token_input,
                self._decode,
                self.model_sha256,
                cache_dir() / "calibration",
                Verdict(cache_dir() / "stage-cut", key),
                Measured(cache_dir() / MEASURED_DIR, {"what": "vocoder window costs", **key.fields()}),
                options.whole_decode_max_frames,
            )
        del proto, rewritten  # the parsed graph is as large as the model
        self._keep_whole = self.streaming is None
        if self.streaming is None:
            self._session()  # the only way it speaks: build it now, and fail now if ONNX Runtime cannot
        self.capabilities = Capabilities(
            word_timings=self.streaming is not None,
            windowed=self.streaming is not None,
            min_windowed_frames=MIN_WINDOWED_FRAMES,
        )
        weights = "float vocoder convolutions" if self.float_vocoder else "int8"
        self.description = f"onnx on {', '.join(self.providers)} ({weights})"

    def _session(self) -> ort.InferenceSession:
        """The single graph's session, built on first use (thread-safe)."""
        with self._whole_lock:
            if self._whole is None:
                assert self._model is not None  # dropped only once the session exists
                try:
                    self._whole = self._make_session(self._model, keep=self._keep_whole)
                except Exception as exc:  # onnxruntime raises its own untyped errors for bad graphs
                    raise AssetError(f"ONNX Runtime could not load the model: {exc}") from exc
                self._model = None
            return self._whole

    def synthesize(self, request: SynthesisRequest) -> Audio:
        ids = tokenize(request.phonemes)
        if not ids:
            return np.zeros(0, dtype=np.float32)
        return self._decode(ids, request.style[len(ids) - 1], request.speed)

    def prepare(self, style: StyleTable, cancel: threading.Event | None = None) -> bool:
        """Calibrate ``style`` for windowed decoding now (seconds of CPU, then cached on disk), and measure
        the decoding steps' costs unless an earlier start kept them (:meth:`DecodeCosts.measure`): False
        when other work ran on the engine meanwhile or ``cancel`` was set, so the costs stay provisional
        (ask again when idle)."""
        if self.streaming is None:
            return True
        self.streaming.calibration.calibrate(style)
        return self.streaming.costs.measure(cancel)

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
    ) -> UtteranceStream:
        """The utterance's timing, then its audio: whole, or window by window with ``windowed`` (see
        :mod:`koe.engine.onnx.decoder`); one whole chunk without timing when the stage cut is unavailable.
        Raises ``SynthesisError`` like :meth:`synthesize`, at once.
        """
        if self.streaming is None:
            tokenize(request.phonemes)  # refuse an over-long utterance now, as the decoder does
            return WholeStream(lambda: self.synthesize(request), cancel)
        return self.streaming.stream(request, windowed=windowed, buffered_s=buffered_s, cancel=cancel)

    def _decode(self, ids: list[int], style_row: npt.NDArray[np.float32], speed: float) -> Audio:
        feeds = {
            self._token_input: np.array([[_PAD, *ids, _PAD]], dtype=np.int64),
            "style": style_row,
            "speed": np.array([speed], dtype=np.float32),
        }
        try:
            (audio,) = self._session().run(None, feeds, RELEASING)[:1]
        except Exception as exc:  # onnxruntime's errors are untyped
            raise SynthesisError(f"inference failed for {len(ids)} tokens: {exc}") from exc
        result: Audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        return result

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Utterance]:
        """The int8 export takes batch 1 only: utterances run one after another, each timed."""
        return [
            Utterance(np.zeros(0, dtype=np.float32))
            if is_cancelled is not None and is_cancelled(index)
            else drain(self.stream(request))
            for index, request in enumerate(requests)
        ]
