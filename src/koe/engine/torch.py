"""The GPU backend: hexgrad's ``kokoro`` KModel in PyTorch, sharing passes among utterances of many sessions.

Install with ``make extra EXTRA=gpu``, which adds ``kokoro==0.9.4`` with ``--no-deps``: kokoro declares
``misaki[en]``, whose ``phonemizer-fork`` overwrites the ``phonemizer`` module koe's G2P uses, while
``KModel`` itself needs only torch, transformers, loguru, huggingface_hub and attrs (the extra's list).

Weights come from :mod:`koe.engine.kmodel.checkpoint` (official, or derived offline from the int8 export;
:attr:`TorchEngine.weights` says which). A batch runs in two masked passes (:mod:`koe.engine.kmodel.forward`):
the text pass gives every utterance's token durations (its word timings), the acoustic pass its audio, with
padding that cannot change what a member sounds like. One lock serializes the passes: the device is one.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from kokoro.model import KModel

from koe.engine.base import (
    BufferedAudio,
    CancelCheck,
    Capabilities,
    SynthesisRequest,
    Utterance,
    UtteranceStream,
    WholeStream,
)
from koe.engine.kmodel.checkpoint import LOCAL, Weights, installed_weights, load_weights
from koe.engine.kmodel.forward import TextSide, acoustic_pass, text_pass
from koe.engine.timing import SegmentTiming
from koe.engine.vocab import tokenize
from koe.errors import AssetError, ConfigError, SynthesisError
from koe.types import SAMPLE_RATE, Audio, StyleTable

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Utterances per pass; bounds device memory (each row is padded to the longest of its pass).
DEFAULT_MAX_BATCH = 16
_STYLE_ROWS, _STYLE_WIDTH = 510, 256


@dataclass(frozen=True, slots=True)
class TorchOptions:
    """Where and how wide to run; ``device=None`` picks CUDA when available, else the CPU.

    ``threads`` sets torch's CPU threads, which is process-wide; None keeps torch's default.
    """

    device: str | None = None
    max_batch: int = DEFAULT_MAX_BATCH
    threads: int | None = None


def choose_device(requested: str | None) -> torch.device:
    """``requested`` as a torch device; raises ``ConfigError`` for CUDA on a machine without it."""
    if requested is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"device {requested!r} was requested but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use --device cpu"
        )
    try:
        return torch.device(requested)
    except RuntimeError as exc:
        raise ConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {requested!r}") from exc


def load_voice_tensors(directory: Path) -> dict[str, StyleTable]:
    """Voices saved by upstream as ``<name>.pt`` tensors (510×1×256), loaded with ``weights_only``."""
    tables: dict[str, StyleTable] = {}
    for path in sorted(directory.glob("*.pt")):
        try:
            tensor = torch.load(path, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError, pickle.UnpicklingError) as exc:
            raise AssetError(f"voice {path} is not a tensor file torch can load safely: {exc}") from exc
        if not isinstance(tensor, torch.Tensor) or tensor.numel() != _STYLE_ROWS * _STYLE_WIDTH:
            raise AssetError(f"voice {path} is not a {_STYLE_ROWS}×1×{_STYLE_WIDTH} tensor")
        tables[path.stem] = tensor.to(torch.float32).reshape(_STYLE_ROWS, 1, _STYLE_WIDTH).numpy()
    return tables


class TorchEngine:
    """KModel on one device; thread-safe (one pass at a time). ``weights`` says which weights it runs."""

    name = "torch"
    sample_rate = SAMPLE_RATE

    def __init__(self, model: KModel, options: TorchOptions | None = None, weights: str = LOCAL) -> None:
        options = options or TorchOptions()
        if options.max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, got {options.max_batch}")
        self._max_batch = options.max_batch
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        self.device = choose_device(options.device)
        self.weights = weights
        self._model = model.to(self.device).eval()
        self._lock = threading.Lock()
        self.capabilities = Capabilities(word_timings=True, max_batch=self._max_batch)
        self.description = f"torch on {self.device} ({weights} weights)"
        logger.info(
            "torch engine on %s (%s weights), passes of up to %d", self.device, weights, self._max_batch
        )

    @classmethod
    def load(cls, weights: Weights | None = None, options: TorchOptions | None = None) -> TorchEngine:
        """The real model with ``weights`` (default: what ``koe install --engine torch`` cached)."""
        choose_device((options or TorchOptions()).device)  # refuse a missing device before loading
        weights = weights or installed_weights()
        return cls(load_weights(weights), options, weights.kind)

    def synthesize(self, request: SynthesisRequest) -> Audio:
        return self.synthesize_batch([request])[0].audio

    def prepare(self, style: StyleTable, cancel: threading.Event | None = None) -> bool:
        """Nothing to prepare: this backend decodes whole utterances."""
        return True

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
    ) -> UtteranceStream:
        """The utterance's timing (the text pass), then all of its audio (the acoustic pass); this backend
        has no windowed decoder. Raises ``SynthesisError`` for phonemes past the model's window, at once."""
        ids = tokenize(request.phonemes)
        if not ids:
            return WholeStream(lambda: np.zeros(0, dtype=np.float32), cancel)
        sides: list[TextSide] = []

        def timing() -> SegmentTiming:
            sides.extend(self._run(lambda: self._text_sides([ids], [request]), 1))
            return _timing(request, sides[0])

        def decode() -> Audio:
            return self._run(lambda: self._audio(sides), 1)[0]

        return WholeStream(decode, cancel, timing)

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Utterance]:
        """Synthesize ``requests`` in passes of up to ``max_batch``; results keep the input order.

        ``is_cancelled(i)`` is polled after the text pass and before each acoustic pass; a cancelled
        utterance gets empty audio and costs no further device time. Raises ``SynthesisError`` for
        phonemes past the model's window or a failing pass (the whole batch fails).
        """
        ids = [tokenize(request.phonemes) for request in requests]
        results = [Utterance(np.zeros(0, dtype=np.float32)) for _ in requests]
        live = sorted((i for i, tokens in enumerate(ids) if tokens), key=lambda i: len(ids[i]))
        sides: dict[int, TextSide] = {}
        for chunk in _chunks(live, self._max_batch):
            rows = [ids[i] for i in chunk]
            texts = self._run(partial(self._text_sides, rows, [requests[i] for i in chunk]), len(requests))
            sides.update(zip(chunk, texts, strict=True))
        for index, side in sides.items():
            results[index] = Utterance(results[index].audio, _timing(requests[index], side))
        by_frames = sorted(sides, key=lambda i: sides[i].frames)
        for chunk in _chunks(by_frames, self._max_batch):
            wanted = [i for i in chunk if not (is_cancelled and is_cancelled(i))]
            if not wanted:
                continue
            members = [sides[i] for i in wanted]
            audio = self._run(partial(self._audio, members), len(requests))
            for index, row in zip(wanted, audio, strict=True):
                results[index] = Utterance(row, results[index].timing)
        return results

    def _run(self, work: Callable[[], T], size: int) -> T:
        try:
            with self._lock, torch.inference_mode():
                return work()
        except (RuntimeError, ValueError, IndexError) as exc:
            raise SynthesisError(f"PyTorch inference failed in a batch of {size}: {exc}") from exc

    def _text_sides(self, rows: list[list[int]], requests: Sequence[SynthesisRequest]) -> list[TextSide]:
        styles = np.stack(
            [request.style[len(row) - 1, 0] for row, request in zip(rows, requests, strict=True)]
        )
        speeds = torch.tensor(
            [request.speed for request in requests], dtype=torch.float32, device=self.device
        )
        return text_pass(self._model, rows, torch.from_numpy(styles).to(self.device), speeds)

    def _audio(self, sides: list[TextSide]) -> list[Audio]:
        return [row.float().cpu().numpy() for row in acoustic_pass(self._model, sides)]


def _chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[start : start + size] for start in range(0, len(indices), size)]


def _timing(request: SynthesisRequest, side: TextSide) -> SegmentTiming:
    return SegmentTiming(request.phonemes, side.durations.cpu().numpy().astype(np.int64))
