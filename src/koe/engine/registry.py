"""Which backend runs the model: ``"onnx"`` (the default) or ``"torch"`` (the GPU extra), chosen once.

Each backend's module is imported only when chosen, so the default install never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from koe.engine.assets import MODEL_SHA256, ModelSource
from koe.engine.base import Engine
from koe.engine.memory import release_freed_memory
from koe.engine.timing import FRAME_SAMPLES
from koe.errors import ConfigError
from koe.extras import install_hint
from koe.types import SAMPLE_RATE

ENGINES = ("onnx", "torch")


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How to run the backend: ``threads`` per session (ONNX Runtime) or process-wide (torch);
    ``device`` and ``max_batch`` (utterances per pass) for torch."""

    kind: str = "onnx"
    threads: int | None = None
    graph_optimization: str = "all"  # ONNX Runtime's level: "basic" | "extended" | "all"
    device: str | None = None  # torch: "cpu", "cuda", "cuda:N"; None picks CUDA when there is one
    max_batch: int | None = None  # torch: None keeps the engine's default
    dtype: str = "float32"  # torch: the weights' and passes' format (koe.engine.kmodel.precision)
    buckets: bool | None = None  # torch: passes padded to buckets, warmed, CUDA graphs; None: on for CUDA
    #: ONNX Runtime's intra-op threads spin between operators; off where the engine's threads outnumber the
    #: cores (:attr:`koe.settings.Settings.layout`), so that no spinning thread holds a core another needs
    spin: bool = True
    #: ONNX: the longest segment decoded in one vocoder run when not windowed, in seconds (None: no limit)
    whole_decode_max_s: float | None = None
    #: ONNX on the CPU: the vocoder's convolutions run in float (:attr:`OnnxOptions.float_vocoder`)
    float_vocoder: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.kind!r}")


def load_engine(options: EngineOptions, source: ModelSource) -> Engine:
    """Load the chosen backend from ``source`` (verified, never fetched).

    Raises:
        AssetError: weights missing or not the expected files. ConfigError: the backend's extra is missing,
            or a device that is not there (CUDA without CUDA).
    """
    release_freed_memory()  # every process that runs the engine: its freed buffers go back to the system
    if options.kind == "torch":
        try:
            from koe.engine.kmodel.checkpoint import LOCAL, Weights, installed_weights
            from koe.engine.torch import DEFAULT_MAX_BATCH, TorchEngine, TorchOptions
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"the torch engine needs {exc.name}: {install_hint('gpu')}",
                code="missing_extra",
            ) from exc
        weights = Weights(source.model_path, LOCAL) if source.model_path else installed_weights()
        torch_options = TorchOptions(
            options.device,
            options.max_batch or DEFAULT_MAX_BATCH,
            options.threads,
            buckets=options.buckets,
            dtype=options.dtype,
        )
        return TorchEngine.load(weights, torch_options)
    from koe.engine.onnx.engine import OnnxEngine, OnnxOptions

    return OnnxEngine(
        source.model_bytes(),
        OnnxOptions(
            threads=options.threads,
            graph_optimization=options.graph_optimization,
            spin=options.spin,
            whole_decode_max_frames=_frames(options.whole_decode_max_s),
            float_vocoder=options.float_vocoder,
        ),
        MODEL_SHA256 if source.model_path is None else None,  # the packaged bytes were verified against it
    )


def _frames(seconds: float | None) -> int | None:
    """Model frames (25 ms each) in ``seconds`` of audio, at least one; None stays None."""
    return None if seconds is None else max(1, round(seconds * SAMPLE_RATE / FRAME_SAMPLES))
