"""``koe install --engine torch``: the torch engine's weights into koe's cache, official or derived.

The official checkpoint comes from Hugging Face (internet); the derived one from the int8 export already
on this machine (:mod:`koe.conversion.derive`). Both are checked against their pins before they are kept.
"""

from __future__ import annotations

import logging
from pathlib import Path

from koe.conversion.derive import derive_state
from koe.engine.assets import packaged_model_bytes
from koe.engine.kmodel.checkpoint import (
    DEQUANTIZED,
    DERIVED_DIGEST,
    HF_REPO,
    OFFICIAL,
    WEIGHTS_FILE,
    WEIGHTS_SHA256,
    Weights,
    build_model,
    derived_path,
    load_checkpoint,
    official_path,
    save_checkpoint,
    state_digest,
    verify_derived,
    verify_file,
)
from koe.errors import AssetError, ConfigError

logger = logging.getLogger(__name__)


def derive_weights(target: Path | None = None, *, model_bytes: bytes | None = None) -> Weights:
    """Derive the KModel weights from the pinned int8 export (offline), check their digest, cache them.

    Raises:
        AssetError: the export is missing or not the pinned one, or the derived tensors do not match the
            pinned digest (a derivation change, or another numpy doing the arithmetic differently).
    """
    target = target or derived_path()
    model = build_model()
    modules = {name for name, _ in model.named_modules() if name}
    derived = derive_state(model_bytes or packaged_model_bytes(), model.state_dict(), modules)
    digest = state_digest(derived.state)
    if digest != DERIVED_DIGEST:
        raise AssetError(
            f"weights derived from the int8 export have digest {digest}, expected the pinned {DERIVED_DIGEST}"
        )
    logger.info("derived %d parameters from the int8 export (%d set to no-ops)", len(derived.state),
                len(derived.filled))  # fmt: skip
    return Weights(save_checkpoint(derived.state, target), DEQUANTIZED)


def download_official(target: Path | None = None) -> Weights:
    """Download ``kokoro-v1_0.pth`` from Hugging Face into koe's cache once, verified (needs internet)."""
    target = target or official_path()
    if target.is_file():
        return Weights(verify_file(target, WEIGHTS_SHA256), OFFICIAL)
    from huggingface_hub import hf_hub_download

    target.parent.mkdir(parents=True, exist_ok=True)
    downloaded = Path(hf_hub_download(HF_REPO, WEIGHTS_FILE, local_dir=target.parent))
    return Weights(verify_file(downloaded, WEIGHTS_SHA256), OFFICIAL)


#: ``koe install --engine torch --weights``: official with a fallback to derived, or only one of them.
WEIGHT_CHOICES = ("auto", OFFICIAL, "derived")


def install(choice: str = "auto") -> Weights:
    """Put the torch engine's weights in the cache, verified: ``official`` downloads them (internet),
    ``derived`` derives them from the int8 export (offline; an intact cached copy is kept), ``auto``
    tries the official ones and derives when they cannot be fetched.

    Raises:
        AssetError: a download or derivation that does not match its pin (never papered over by the
            fallback), or the chosen source failing.
        ConfigError: an unknown ``choice``.
    """
    if choice not in WEIGHT_CHOICES:
        raise ConfigError(f"weights must be one of {', '.join(WEIGHT_CHOICES)}, got {choice!r}")
    if choice != "derived":
        try:
            return download_official()
        except AssetError:
            raise
        except Exception as exc:  # no internet, no huggingface_hub, the Hub refusing: all mean "derive"
            if choice == OFFICIAL:
                raise AssetError(f"the official weights could not be downloaded: {exc}") from exc
            logger.warning("official weights unavailable (%s); deriving them from the int8 model", exc)
    if derived_path().is_file():
        try:
            verify_derived(load_checkpoint(build_model(), derived_path()), derived_path())
            return Weights(derived_path(), DEQUANTIZED)
        except AssetError as exc:
            logger.warning("the cached derived weights are unusable (%s); deriving them again", exc.message)
    return derive_weights()
