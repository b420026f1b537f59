"""Which backend runs the model: ``"onnx"`` (the default) or ``"torch"`` (the GPU extra), chosen once.

Each backend's module is imported only when chosen, so the default install never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from koe.engine.assets import MODEL_SHA256, ModelSource
from koe.engine.base import Engine
from koe.errors import ConfigError
from koe.extras import install_hint

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
    #: ONNX Runtime's intra-op threads spin between operators; off where the engine's threads outnumber the
    #: cores (:attr:`koe.settings.Settings.layout`), so that no spinning thread holds a core another needs
    spin: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.kind!r}")


def load_engine(options: EngineOptions, source: ModelSource) -> Engine:
    """Load the chosen backend from ``source`` (verified, never fetched).

    Raises:
        AssetError: weights missing or not the expected files. ConfigError: the backend's extra is missing,
            or a device that is not there (CUDA without CUDA).
    """
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
        torch_options = TorchOptions(options.device, options.max_batch or DEFAULT_MAX_BATCH, options.threads)
        return TorchEngine.load(weights, torch_options)
    from koe.engine.onnx.engine import OnnxEngine, OnnxOptions

    return OnnxEngine(
        source.model_bytes(),
        OnnxOptions(
            threads=options.threads, graph_optimization=options.graph_optimization, spin=options.spin
        ),
        MODEL_SHA256 if source.model_path is None else None,  # the packaged bytes were verified against it
    )
