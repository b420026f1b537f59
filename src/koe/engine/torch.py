"""The GPU backend: hexgrad's ``kokoro`` KModel in PyTorch, sharing passes among utterances of many sessions.

Install with ``make extra EXTRA=gpu``, which adds ``kokoro==0.9.4`` with ``--no-deps``: kokoro declares
``misaki[en]``, whose ``phonemizer-fork`` overwrites the ``phonemizer`` module koe's G2P uses, while
``KModel`` itself needs only torch, transformers, loguru, huggingface_hub and attrs (the extra's list).

Weights come from :mod:`koe.engine.kmodel.checkpoint` (official, or derived offline from the int8 export;
:attr:`TorchEngine.weights` says which). A batch runs in two masked passes (:mod:`koe.engine.kmodel.forward`):
the text pass gives every utterance's token durations (its word timings), the acoustic pass its audio, with
padding that cannot change what a member sounds like. One lock serializes the passes: the device is one.

On CUDA every pass is padded to one of a few shapes (:mod:`koe.engine.kmodel.buckets`), each run once at
start, and the acoustic core of the smaller ones replays from a CUDA graph (:mod:`koe.engine.kmodel.graphs`):
no listener pays for a shape the device meets for the first time. On the CPU all three are off by default:
padding costs compute there in proportion, and a new shape costs little (docs/engine.md, "Bucketed shapes").
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections import Counter
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
from koe.engine.kmodel.buckets import PAD_TOKENS, Buckets, Shape
from koe.engine.kmodel.checkpoint import LOCAL, Weights, installed_weights, load_weights
from koe.engine.kmodel.forward import TextSide, acoustic_core, acoustic_inputs, acoustic_pass, text_pass
from koe.engine.kmodel.graphs import AcousticGraphs
from koe.engine.kmodel.precision import cast, dtype_of
from koe.engine.timing import SegmentTiming
from koe.engine.vocab import tokenize
from koe.errors import AssetError, ConfigError, SynthesisError
from koe.types import SAMPLE_RATE, Audio, StyleTable

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Utterances per pass; bounds device memory (each row is padded to the longest of its pass).
DEFAULT_MAX_BATCH = 16
#: Buckets of at most this many rows × width (tokens or frames) are warmed at start. A larger acoustic pass
#: computes over 400 s of audio (frames are 25 ms): seconds of work even on a GPU, next to which a new
#: shape's one-off cost is small, and no first segment is that long. Its memory grows with rows × width
#: too (the largest warmed pass is also the largest the device must hold).
WARM_LIMIT = 16_384
#: Acoustic buckets of at most this many rows × frames replay from a CUDA graph: a graph saves launching
#: the core's ~2,000 operators one by one, which matters while they are short; each graph also keeps
#: buffers its size.
GRAPH_LIMIT = 4_096
#: The phoneme warm-up passes are made of (any symbol of the vocabulary would do).
_WARM_PHONEME = "ə"
_STYLE_ROWS, _STYLE_WIDTH = 510, 256


@dataclass(frozen=True, slots=True)
class TorchOptions:
    """Where and how wide to run; ``device=None`` picks CUDA when available, else the CPU.

    ``threads`` sets torch's CPU threads, which is process-wide; None keeps torch's default. ``buckets``
    pads every pass to one of a few shapes; ``warm`` runs each bucket of at most ``warm_limit`` rows ×
    width once at start; ``graphs`` replays the acoustic core from a CUDA graph per bucket of at most
    :data:`GRAPH_LIMIT` (captured while warming). None means on for CUDA, off on the CPU. ``dtype``: the
    format the weights are cast to and the passes run in (:mod:`koe.engine.kmodel.precision`): ``float32``,
    ``float16`` (CUDA only) or ``bfloat16``.
    """

    device: str | None = None
    max_batch: int = DEFAULT_MAX_BATCH
    threads: int | None = None
    buckets: bool | None = None
    warm: bool | None = None
    graphs: bool | None = None
    warm_limit: int = WARM_LIMIT
    dtype: str = "float32"


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
        #: As asked (None: decided by the device; :attr:`buckets` and :attr:`description` say what runs).
        self.options = options
        if options.max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, got {options.max_batch}")
        self._max_batch = options.max_batch
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        self.device = choose_device(options.device)
        self.weights = weights
        #: The format the weights are in and the passes run in.
        self.dtype = dtype_of(options.dtype, self.device)
        self._model = cast(model.to(self.device), self.dtype).eval()
        self._lock = threading.Lock()
        self.capabilities = Capabilities(word_timings=True, max_batch=self._max_batch)
        cuda = self.device.type == "cuda"
        bucketed, warm, graphs = _switches(options, self.device)
        max_duration = self._model.predictor.duration_proj.linear_layer.out_features
        #: The shapes passes are padded to; None: each pass has its own.
        self.buckets = Buckets.for_model(max_duration, self._max_batch) if bucketed else None
        self._graphs = AcousticGraphs(partial(acoustic_core, self._model)) if graphs else None
        self._shapes: Counter[tuple[str, int, int]] = Counter()
        self._shapes_lock = threading.Lock()
        #: The (pass, rows, width) buckets warming ran, in order, and how long it took.
        self.warmed: list[tuple[str, int, int]] = []
        self.warm_s: float | None = None
        logger.info(
            "torch engine on %s (%s weights, %s), passes of up to %d; buckets %s, warm-up %s, CUDA graphs %s",
            self.device, weights, options.dtype, self._max_batch, _on(bucketed), _on(warm), _on(graphs),
        )  # fmt: skip
        if warm and self.buckets is not None:
            self._warm(self.buckets, options.warm_limit)
        in_dtype = "" if self.dtype == torch.float32 else f" in {options.dtype}"
        details = [f"{weights} weights{in_dtype}", *(["bucketed shapes"] if self.buckets else [])]
        if cuda:
            details.append("CUDA graphs on" if self._graphs is not None else "CUDA graphs off")
        self.description = f"torch on {self.device} ({'; '.join(details)})"

    @classmethod
    def load(cls, weights: Weights | None = None, options: TorchOptions | None = None) -> TorchEngine:
        """The real model with ``weights`` (default: what ``koe install --engine torch`` cached)."""
        choose_device((options or TorchOptions()).device)  # refuse a missing device before loading
        weights = weights or installed_weights()
        return cls(load_weights(weights), options, weights.kind)

    def sharing(self, options: TorchOptions) -> TorchEngine:
        """Another engine on this one's model (no second copy in memory) with ``options``: for comparing
        switches on one device. The two must not run passes at the same time.

        Raises:
            ConfigError: ``options`` asks for another device or format (the model is cast in place).
        """
        if choose_device(options.device) != self.device or options.dtype != self.options.dtype:
            raise ConfigError(
                f"a sharing engine runs on this one's {self.device} in {self.options.dtype}, got "
                f"{options.device or 'the default device'} in {options.dtype}"
            )
        return TorchEngine(self._model, options, self.weights)

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

    @property
    def graph_shapes(self) -> list[Shape]:
        """The acoustic (rows, frames) buckets that replay a CUDA graph."""
        return self._graphs.shapes if self._graphs is not None else []

    def pass_shapes(self) -> dict[tuple[str, int, int], int]:
        """Passes run for requests so far (warming not counted), by (``"text"`` or ``"acoustic"``, rows,
        width): with buckets, only bucket shapes."""
        with self._shapes_lock:
            return dict(self._shapes)

    def _shape(self, kind: str, rows: int, width: int) -> Shape:
        if self.buckets is not None:
            fit = self.buckets.text_shape if kind == "text" else self.buckets.acoustic_shape
            rows, width = fit(rows, width)
        with self._shapes_lock:
            self._shapes[kind, rows, width] += 1
        return rows, width

    def _text_sides(self, rows: list[list[int]], requests: Sequence[SynthesisRequest]) -> list[TextSide]:
        styles = np.stack(
            [request.style[len(row) - 1, 0] for row, request in zip(rows, requests, strict=True)]
        )
        speeds = torch.tensor(
            [request.speed for request in requests], dtype=torch.float32, device=self.device
        )
        shape = self._shape("text", len(rows), max(len(row) for row in rows) + PAD_TOKENS)
        return text_pass(self._model, rows, torch.from_numpy(styles).to(self.device), speeds, shape)

    def _audio(self, sides: list[TextSide]) -> list[Audio]:
        shape = self._shape("acoustic", len(sides), max(side.frames for side in sides))
        audio = acoustic_pass(self._model, sides, shape, self._graphs)
        return [row.float().cpu().numpy() for row in audio]

    def _warm(self, buckets: Buckets, limit: int) -> None:
        """Capture the CUDA graphs (largest first), then run every bucket of at most ``limit`` rows × width
        once (smallest first). In that order because each capture empties the allocator's cache, which the
        eager passes are to leave grown. A capture that fails turns the graphs off: every pass then runs
        eagerly. A bucket that fails (out of device memory) ends warming: larger ones run cold."""
        started = time.perf_counter()
        texts, acoustics = buckets.plan(limit)
        template = self._run(partial(self._warm_text, 1, buckets.tokens[0]), 1)[0]
        self._capture(template, [shape for shape in acoustics if shape[0] * shape[1] <= GRAPH_LIMIT])
        runs = [*(("text", shape) for shape in texts), *(("acoustic", shape) for shape in acoustics)]
        for kind, (rows, width) in runs:
            if kind == "text":
                work: Callable[[], object] = partial(self._warm_text, rows, width)
            else:
                work = partial(acoustic_pass, self._model, _warm_sides(template, rows, width), (rows, width))
            try:
                self._run(work, rows)
            except SynthesisError:
                logger.warning("warming stopped at the %s bucket of %d × %d; larger buckets run cold",
                               kind, rows, width, exc_info=True)  # fmt: skip
                break
            self.warmed.append((kind, rows, width))
        self.warm_s = time.perf_counter() - started
        text = sum(kind == "text" for kind, _, _ in self.warmed)
        logger.info(
            "warmed %d text and %d acoustic buckets (%d with a CUDA graph) in %.1f s",
            text, len(self.warmed) - text, len(self.graph_shapes), self.warm_s,
        )  # fmt: skip

    def _warm_text(self, rows: int, width: int) -> list[TextSide]:
        """A text pass of ``rows`` utterances exactly ``width`` tokens wide, padding tokens included."""
        row = tokenize(_WARM_PHONEME) * (width - PAD_TOKENS)
        styles = torch.zeros((rows, _STYLE_WIDTH), device=self.device)
        speeds = torch.ones(rows, device=self.device)
        return text_pass(self._model, [row] * rows, styles, speeds, (rows, width))

    def _capture(self, template: TextSide, shapes: list[Shape]) -> None:
        graphs = self._graphs
        if graphs is None:
            return
        for rows, width in sorted(shapes, key=lambda shape: (shape[0] * shape[1], shape[0]), reverse=True):
            sides = _warm_sides(template, rows, width)
            try:
                self._run(partial(self._capture_shape, graphs, sides, (rows, width)), rows)
            except SynthesisError:
                logger.error("CUDA graphs off: the capture at %d × %d failed", rows, width, exc_info=True)
                self._graphs = None
                return

    def _capture_shape(self, graphs: AcousticGraphs, sides: list[TextSide], shape: Shape) -> None:
        graphs.capture(acoustic_inputs(self._model, sides, shape))


def _switches(options: TorchOptions, device: torch.device) -> tuple[bool, bool, bool]:
    """Buckets, warm-up and CUDA graphs as asked, None meaning on for CUDA; raises ``ConfigError`` for a
    combination that cannot work."""
    cuda = device.type == "cuda"
    buckets = cuda if options.buckets is None else options.buckets
    warm = buckets and cuda if options.warm is None else options.warm
    graphs = warm and cuda if options.graphs is None else options.graphs
    if (warm or graphs) and not buckets:
        raise ConfigError(
            f"warm-up and CUDA graphs need buckets (without them every width is a new shape), got "
            f"buckets off with warm={warm}, graphs={graphs}"
        )
    if graphs and not cuda:
        raise ConfigError(f"CUDA graphs need a CUDA device, got {device}")
    if graphs and not warm:
        raise ConfigError("CUDA graphs are captured while warming: graphs=True needs warm on, got warm=False")
    if options.warm_limit < 1:
        raise ConfigError(f"warm_limit must be at least 1 (rows × width), got {options.warm_limit}")
    return buckets, warm, graphs


def _on(switch: bool) -> str:
    return "on" if switch else "off"


def _warm_sides(template: TextSide, rows: int, width: int) -> list[TextSide]:
    """``rows`` utterances for a warm-up acoustic pass ``width`` frames wide: the first exactly that long,
    each next one a frame shorter (so the masks differ), made of ``template``'s tokens."""
    sides = []
    for r in range(rows):
        frames = max(1, width - r)
        count = min(template.durations.shape[0], frames)
        base, extra = divmod(frames, count)
        durations = torch.full((count,), base, dtype=torch.long, device=template.durations.device)
        durations[:extra] += 1
        prosody, text = template.prosody[:, :count], template.text[:, :count]
        sides.append(TextSide(durations, prosody, text, template.style))
    return sides


def _chunks(indices: list[int], size: int) -> list[list[int]]:
    return [indices[start : start + size] for start in range(0, len(indices), size)]


def _timing(request: SynthesisRequest, side: TextSide) -> SegmentTiming:
    return SegmentTiming(request.phonemes, side.durations.cpu().numpy().astype(np.int64))
