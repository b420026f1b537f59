"""Where the torch engine's weights come from, and proof that they are the expected ones.

Two sources, in this order of preference:

* **official**: hexgrad's ``kokoro-v1_0.pth`` from Hugging Face (needs internet), sha256-pinned;
* **dequantized int8**: derived offline from the int8 ONNX export that ``koe install`` already verifies
  (:mod:`koe.conversion`), saved in koe's cache and pinned by a digest of its tensors (name, dtype,
  shape and bytes of every parameter, so the pin does not depend on torch's file format).

Getting them there is ``koe install --engine torch`` (:mod:`koe.conversion.install`); this module finds,
verifies and loads what is there.

Either is loaded strictly with ``weights_only=True``: a checkpoint that lacks a parameter, has one of the
wrong shape, or pickles objects is refused (upstream falls back to ``strict=False`` and would run with
random parts). The only parameters allowed to be absent are the ones that are no-ops by construction
(:func:`no_op_value`). Which source is in use is logged and exposed as :attr:`Weights.kind`.
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from kokoro.model import KModel

from koe.engine.assets import cache_dir
from koe.engine.vocab import kokoro_config
from koe.errors import AssetError
from koe.machine import partial_of

logger = logging.getLogger(__name__)

HF_REPO = "hexgrad/Kokoro-82M"
WEIGHTS_FILE = "kokoro-v1_0.pth"
#: sha256 of ``kokoro-v1_0.pth`` (hexgrad/Kokoro-82M, revision f3ff357), as several independent projects
#: pin it; no copy is reachable from the machine koe is developed on, so it was not hashed here.
WEIGHTS_SHA256 = "496dba118d1a58f5f3db2efc88dbdc216e0483fc89fe6e47ee1f2c53f18ad1e4"
DERIVED_FILE = "kokoro-v1_0-dequantized-int8.pth"
#: :func:`state_digest` of the state derived from the pinned int8 export: a derivation that gives other
#: tensors is refused.
DERIVED_DIGEST = "f07608d3986ac9bc1242ef00d7af3fc92936de054561c4b7658465eb321af9a3"
#: The checkpoint's top-level keys: one state dict per KModel component.
COMPONENTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
#: Upstream saved the components wrapped in ``DataParallel``; its keys carry this prefix.
_PARALLEL_PREFIX = "module."

OFFICIAL = "official"
DEQUANTIZED = "dequantized int8"
LOCAL = "local checkpoint"

#: Parameters that leave the output unchanged at these values: AdaIN's instance-norm affine (upstream's
#: comment: "affine should be False"; the ONNX export has none) and ALBERT's pooler (never read).
_NO_OP_SUFFIXES = {".norm.weight": 1.0, ".norm.bias": 0.0}
_NO_OP_PREFIXES = {"bert.pooler.": 0.0}


@dataclass(frozen=True, slots=True)
class Weights:
    """A verified checkpoint: its file and which of the sources it is (``kind``)."""

    path: Path
    kind: str


def no_op_value(key: str) -> float | None:
    """The value under which parameter ``key`` (KModel's flat key) changes nothing, if it has one."""
    for prefix, value in _NO_OP_PREFIXES.items():
        if key.startswith(prefix):
            return value
    for suffix, value in _NO_OP_SUFFIXES.items():
        if key.endswith(suffix):
            return value
    return None


def official_path() -> Path:
    return cache_dir() / "torch" / WEIGHTS_FILE


def derived_path() -> Path:
    return cache_dir() / "torch" / DERIVED_FILE


def verify_file(path: Path, expected_sha256: str) -> Path:
    """Hash ``path`` in a stream (the checkpoint is 313 MiB) and raise ``AssetError`` on a mismatch."""
    with path.open("rb") as handle:
        got = hashlib.file_digest(handle, "sha256").hexdigest()
    if got != expected_sha256:
        raise AssetError(f"{path}: sha256 {got} does not match the pinned {expected_sha256}")
    return path


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in key order: independent of the file."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().to("cpu").contiguous()
        digest.update(f"{key}|{tensor.dtype}|{list(tensor.shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def build_model(config: Mapping[str, object] | None = None) -> KModel:
    """KModel's architecture from ``config`` (default: the packaged config.json), with random weights."""
    buffer = io.BytesIO()
    torch.save({}, buffer)  # KModel always loads a checkpoint in __init__; an empty one leaves it to us
    buffer.seek(0)
    with warnings.catch_warnings():
        # Upstream's architecture, not ours to change: a 1-layer LSTM declared with dropout, and the
        # legacy weight_norm its checkpoint's parameter names depend on.
        warnings.filterwarnings("ignore", "dropout option adds dropout", UserWarning)
        warnings.filterwarnings("ignore", "`torch.nn.utils.weight_norm` is deprecated", FutureWarning)
        model = KModel(repo_id=HF_REPO, config=dict(config or kokoro_config()), model=buffer)
    return model.eval()


def load_checkpoint(model: KModel, path: Path) -> KModel:
    """Load a ``.pth`` into ``model`` with ``weights_only=True``, every component strictly (see the module
    docstring for the one exception)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (OSError, RuntimeError, pickle.UnpicklingError) as exc:
        raise AssetError(f"cannot load checkpoint {path}: {exc}") from exc
    if not isinstance(checkpoint, dict) or set(checkpoint) != set(COMPONENTS):
        got = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise AssetError(f"checkpoint {path} must hold the components {list(COMPONENTS)}, got {got}")
    for name in COMPONENTS:
        component = getattr(model, name)
        state = {key.removeprefix(_PARALLEL_PREFIX): value for key, value in checkpoint[name].items()}
        for key, like in component.state_dict().items():
            fill = no_op_value(f"{name}.{key}")
            if key not in state and fill is not None:
                state[key] = torch.full_like(like, fill)
        try:
            component.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise AssetError(f"checkpoint {path}: component {name!r} does not fit the model: {exc}") from exc
    return model


def save_checkpoint(state: Mapping[str, torch.Tensor], path: Path) -> Path:
    """``state`` (flat KModel keys) as upstream's checkpoint layout, written atomically."""
    nested: dict[str, dict[str, torch.Tensor]] = {name: {} for name in COMPONENTS}
    for key, value in state.items():
        component, rest = key.split(".", 1)
        nested[component][rest] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_of(path)
    torch.save(nested, partial)
    partial.replace(path)
    return path


def verify_derived(model: KModel, path: Path) -> None:
    """The loaded derived checkpoint is the pinned derivation (catches a corrupt or stale cache file)."""
    digest = state_digest({f"{name}.{key}": value for name in COMPONENTS
                           for key, value in getattr(model, name).state_dict().items()})  # fmt: skip
    if digest != DERIVED_DIGEST:
        raise AssetError(
            f"{path}: tensor digest {digest} does not match the pinned {DERIVED_DIGEST}; "
            "delete it and run `koe install --engine torch` again"
        )


def installed_weights() -> Weights:
    """The weights ``koe install --engine torch`` left in the cache: the official ones if present, else
    the derived ones; raises ``AssetError`` saying how to install them when neither is there."""
    if official_path().is_file():
        return Weights(verify_file(official_path(), WEIGHTS_SHA256), OFFICIAL)
    if derived_path().is_file():
        return Weights(derived_path(), DEQUANTIZED)  # its digest is checked once loaded
    raise AssetError(
        f"PyTorch weights are missing from {official_path().parent}: run `koe install --engine torch` "
        "(official weights with internet, else derived offline from the int8 model)"
    )


def load_weights(weights: Weights) -> KModel:
    """A KModel with ``weights`` loaded and, for derived ones, their digest checked."""
    model = load_checkpoint(build_model(), weights.path)
    if weights.kind == DEQUANTIZED:
        verify_derived(model, weights.path)
    logger.info("PyTorch weights: %s (%s)", weights.kind, weights.path)
    return model
