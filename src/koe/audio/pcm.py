"""float32 samples → 16-bit integers, the one conversion every format shares."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koe.types import Audio

# Symmetric scale: +1.0 → 32767 and -1.0 → -32767, so a full-scale sine stays undistorted.
_INT16_SCALE = 32767.0


def to_int16(audio: Audio) -> npt.NDArray[np.int16]:
    """Scale float samples to little-endian int16, clipping anything outside [-1, 1]."""
    scaled = np.multiply(audio, _INT16_SCALE, dtype=np.float32)
    np.clip(scaled, -_INT16_SCALE, _INT16_SCALE, out=scaled)
    np.rint(scaled, out=scaled)
    return scaled.astype("<i2")


def to_pcm16(audio: Audio) -> bytes:
    """Raw s16le bytes (2 per sample) for `audio`: the `pcm` format and the payload of WAV."""
    return to_int16(audio).tobytes()
