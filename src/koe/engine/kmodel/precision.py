"""The torch engine's number format: its weights cast at load, its passes run under autocast.

The checkpoint on disk stays float32 (the derived one is pinned by a digest of its float32 tensors); a
half-precision engine casts the loaded model once. Its passes then run under :func:`torch.autocast`, which
picks per operator: convolutions, matrix products and LSTMs in the half format, reductions and
transcendental functions in float32 on CUDA. What must not lose precision is float32 by construction,
whatever autocast's lists say:

* the harmonic source (:data:`FLOAT32_MODULES`, run with autocast off): its phase is a running sum over
  every sample of the utterance, which half precision cannot hold to a fraction of a cycle;
* the STFT and its inverse (autocast off, float32 input): cuFFT takes half-precision input only at
  power-of-two sizes (Kokoro's is 20), and the audio's last step should not round to 11 bits;
* the masked instance norms and the duration sums (:mod:`koe.engine.kmodel.forward`): a variance summed
  over thousands of frames overflows float16, and a duration rounded to the nearest frame should not move
  with the format.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from kokoro.model import KModel

from koe.errors import ConfigError

#: The formats an engine can run in, by the name settings give them.
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: The parts of the generator whose weights stay float32 in any format (see the module docstring; its STFT
#: holds its window outside the module's state, so no cast reaches it).
FLOAT32_MODULES = ("m_source",)


def dtype_of(name: str, device: torch.device) -> torch.dtype:
    """The format ``name`` stands for on ``device``.

    Raises:
        ConfigError: ``name`` is no format of :data:`DTYPES`, or float16 on the CPU (whose kernels for it
            are few and slow; bfloat16 is the CPU's half format).
    """
    dtype = DTYPES.get(name)
    if dtype is None:
        raise ConfigError(f"torch dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    if dtype == torch.float16 and device.type != "cuda":
        raise ConfigError(f"float16 needs a CUDA device, got {device}; use bfloat16 on the CPU")
    return dtype


def cast(model: KModel, dtype: torch.dtype) -> KModel:
    """``model``'s weights cast to ``dtype`` in place, but for :data:`FLOAT32_MODULES`."""
    model.to(dtype)
    generator = model.decoder.generator
    for name in FLOAT32_MODULES:
        getattr(generator, name).float()
    return model


def model_dtype(model: KModel) -> torch.dtype:
    """The format ``model``'s weights were cast to (its token embeddings' format)."""
    dtype: torch.dtype = model.bert.embeddings.word_embeddings.weight.dtype
    return dtype


def computing(model: KModel) -> AbstractContextManager[object]:
    """The context a pass of ``model`` runs in: autocast to its format, nothing for float32.

    Autocast's cache of cast weights stays off: CUDA graphs cannot capture with it on, and the weights are
    in the format already (what is cast per call is activations and the few float32 weights)."""
    dtype = model_dtype(model)
    if dtype == torch.float32:
        return nullcontext()
    device = model.bert.embeddings.word_embeddings.weight.device
    return torch.autocast(device.type, dtype=dtype, cache_enabled=False)


def exact(device: torch.device) -> AbstractContextManager[object]:
    """Autocast off on ``device``, for the float32 steps inside a pass (the module docstring's list)."""
    return torch.autocast(device.type, enabled=False)
