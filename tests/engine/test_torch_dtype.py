"""The torch engine's number format and its buckets switch, from the settings to the model:
``KOE_TORCH_DTYPE`` casts the weights (the harmonic source and STFT stay float32) and
``KOE_TORCH_BUCKETS`` turns buckets, warm-up and CUDA graphs off, on random weights. That bfloat16 still
speaks as float32 does is checked on the derived weights (``test_torch_real.py``), float16 on CUDA in
``test_torch_cuda.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from koe.engine.assets import ModelSource
from koe.engine.registry import EngineOptions, load_engine
from koe.errors import ConfigError
from koe.settings import Settings

torch = pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")

from kokoro.model import KModel  # noqa: E402

from koe.engine.base import SynthesisRequest  # noqa: E402
from koe.engine.kmodel.checkpoint import COMPONENTS, build_model, load_checkpoint  # noqa: E402
from koe.engine.kmodel.precision import FLOAT32_MODULES  # noqa: E402
from koe.engine.torch import TorchEngine, TorchOptions  # noqa: E402

_SAMPLES_PER_FRAME = 600


@pytest.fixture(scope="module")
def checkpoint(random_kmodel: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared random model as a float32 checkpoint, as ``KOE_MODEL_DIR`` would hold it: each test loads
    its own copy (an engine casts its model in place)."""
    path = tmp_path_factory.mktemp("weights") / "kokoro-v1_0.pth"
    torch.save({name: getattr(random_kmodel, name).state_dict() for name in COMPONENTS}, path)
    return path


def _fresh(checkpoint: Path) -> KModel:
    return load_checkpoint(build_model(), checkpoint)


def _dtypes(module: torch.nn.Module) -> set[torch.dtype]:
    """The formats of ``module``'s floating-point parameters and buffers (ids and positions stay integers)."""
    tensors = [*module.parameters(), *module.buffers()]
    return {tensor.dtype for tensor in tensors if tensor.is_floating_point()}


def test_settings_read_the_dtype_and_the_buckets_switch() -> None:
    settings = Settings.from_env({"KOE_TORCH_DTYPE": "bfloat16", "KOE_TORCH_BUCKETS": "0"})
    assert (settings.torch_dtype, settings.torch_buckets) == ("bfloat16", False)
    assert (Settings.from_env({}).torch_dtype, Settings.from_env({}).torch_buckets) == ("float32", None)
    with pytest.raises(ConfigError, match="KOE_TORCH_DTYPE"):
        Settings.from_env({"KOE_TORCH_DTYPE": "int8"})


def test_bfloat16_casts_the_weights_but_keeps_the_harmonic_source_and_stft_in_float32(
    checkpoint: Path,
) -> None:
    source = ModelSource(model_path=checkpoint, voices_dir=checkpoint.parent)
    engine = load_engine(EngineOptions("torch", threads=1, device="cpu", dtype="bfloat16"), source)
    assert isinstance(engine, TorchEngine) and engine.dtype == torch.bfloat16
    model = engine._model
    generator = model.decoder.generator
    assert _dtypes(model.bert) == _dtypes(model.decoder.decode) == {torch.bfloat16}
    for name in FLOAT32_MODULES:
        assert _dtypes(getattr(generator, name)) == {torch.float32}, name
    assert generator.stft.window.dtype == torch.float32
    assert engine.description == "torch on cpu (local checkpoint weights in bfloat16)"
    style = torch.randn(510, 1, 256).numpy()
    (utterance,) = engine.synthesize_batch([SynthesisRequest("həlˈoʊ", style, 1.0)])
    assert utterance.timing is not None and utterance.audio.dtype == "float32"
    assert utterance.audio.size == int(utterance.timing.durations.sum()) * _SAMPLES_PER_FRAME
    assert float(abs(utterance.audio).max()) > 0


def test_buckets_switch_reaches_the_engine_from_the_engine_options(checkpoint: Path) -> None:
    source = ModelSource(model_path=checkpoint, voices_dir=checkpoint.parent)
    on = load_engine(EngineOptions("torch", threads=1, device="cpu", buckets=True), source)
    off = load_engine(EngineOptions("torch", threads=1, device="cpu", buckets=False), source)
    assert isinstance(on, TorchEngine) and isinstance(off, TorchEngine)
    assert on.buckets is not None and off.buckets is None and off.graph_shapes == []
    style = torch.randn(510, 1, 256).numpy()
    off.synthesize_batch([SynthesisRequest("həlˈoʊ", style, 1.0)])
    on.synthesize_batch([SynthesisRequest("həlˈoʊ", style, 1.0)])
    tokens = len("həlˈoʊ") + 2
    assert ("text", 1, tokens) in off.pass_shapes()  # its own width
    assert ("text", 1, tokens) not in on.pass_shapes() and ("text", 1, 16) in on.pass_shapes()


@pytest.mark.parametrize(
    ("dtype", "error"),
    [("float16", "float16 needs a CUDA device"), ("int8", "torch dtype must be one of")],
)
def test_a_format_the_device_cannot_run_is_a_config_error(checkpoint: Path, dtype: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        TorchEngine(_fresh(checkpoint), TorchOptions(device="cpu", threads=1, dtype=dtype))


def test_a_sharing_engine_in_another_format_is_refused(checkpoint: Path) -> None:
    engine = TorchEngine(_fresh(checkpoint), TorchOptions(device="cpu", threads=1))
    with pytest.raises(ConfigError, match=r"in float32, got .* in bfloat16"):
        engine.sharing(TorchOptions(device="cpu", threads=1, dtype="bfloat16"))
    assert _dtypes(engine._model.bert) == {torch.float32}
