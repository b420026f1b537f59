"""The default backend: Kokoro-82M through ONNX Runtime (CPU here; CUDA when onnxruntime-gpu is installed)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from koe.engine.base import SynthesisRequest
from koe.engine.vocab import tokenize
from koe.errors import AssetError, SynthesisError
from koe.types import SAMPLE_RATE, Audio

logger = logging.getLogger(__name__)

#: Input names differ between exports: kokoro-onnx's (``tokens``) and onnx-community's (``input_ids``).
_TOKEN_INPUTS = ("tokens", "input_ids")
_PAD = 0


@dataclass(frozen=True, slots=True)
class OnnxOptions:
    """Session settings; defaults chosen by measurement on a 2-core CPU (docs/engine.md)."""

    threads: int | None = None  # intra-op threads; None = all cores
    graph_optimization: str = "all"  # "basic" | "extended" | "all"
    providers: tuple[str, ...] | None = None  # None = CUDA when available, else CPU


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

    def __init__(self, model: bytes, options: OnnxOptions | None = None) -> None:
        options = options or OnnxOptions()
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = options.threads or os.cpu_count() or 1
        session_options.inter_op_num_threads = 1
        session_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        session_options.graph_optimization_level = _OPT_LEVELS[options.graph_optimization]
        session_options.log_severity_level = 3  # warnings about unused initializers are noise for users
        providers = choose_providers(options.providers)
        try:
            self._session = ort.InferenceSession(model, session_options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors for bad graphs
            raise AssetError(f"ONNX Runtime could not load the model: {exc}") from exc
        inputs = {i.name for i in self._session.get_inputs()}
        token_inputs = [name for name in _TOKEN_INPUTS if name in inputs]
        if not token_inputs or not {"style", "speed"} <= inputs:
            raise AssetError(
                f"model inputs {sorted(inputs)} are not Kokoro's (tokens/input_ids, style, speed)"
            )
        self._token_input = token_inputs[0]
        self.providers = self._session.get_providers()
        logger.info("ONNX engine on %s, %d threads", self.providers, session_options.intra_op_num_threads)

    def synthesize(self, request: SynthesisRequest) -> Audio:
        ids = tokenize(request.phonemes)
        if not ids:
            return np.zeros(0, dtype=np.float32)
        feeds = {
            self._token_input: np.array([[_PAD, *ids, _PAD]], dtype=np.int64),
            "style": request.style[len(ids) - 1],
            "speed": np.array([request.speed], dtype=np.float32),
        }
        try:
            (audio,) = self._session.run(None, feeds)[:1]
        except Exception as exc:  # onnxruntime's errors are untyped
            raise SynthesisError(f"inference failed for {len(ids)} tokens: {exc}") from exc
        result: Audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        return result

    def synthesize_batch(self, requests: Sequence[SynthesisRequest]) -> list[Audio]:
        """The int8 export takes batch 1 only: utterances run one after another."""
        return [self.synthesize(request) for request in requests]
