"""How close windowed decoding is to the whole decode: log-mel distances, level and band balance, seams.

These are the quality gate's measures (``tests/engine/test_streaming_quality.py``, the streaming
benchmark): a windowed segment must sound like the whole decode of the same segment, within the model's
own take-to-take variation (~3 dB log-mel), with no join standing out from the rest of the utterance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from koe.types import SAMPLE_RATE, Audio

N_FFT = 1024
HOP = 256
N_MELS = 80
#: Bins more than this far below the loudest are clamped to it: silence differs only in inaudible noise.
DYNAMIC_RANGE_DB = 80.0
_EPSILON = 1e-10

FloatMatrix = npt.NDArray[np.float64]


@cache
def _mel_filters(sample_rate: int) -> FloatMatrix:
    """Triangular filters on the HTK mel scale, 0 Hz to Nyquist: ``(N_MELS, N_FFT // 2 + 1)``."""
    frequencies = np.fft.rfftfreq(N_FFT, 1 / sample_rate)
    mel_max = 2595 * np.log10(1 + (sample_rate / 2) / 700)
    edges = 700 * (10 ** (np.linspace(0, mel_max, N_MELS + 2) / 2595) - 1)
    filters = np.zeros((N_MELS, frequencies.size))
    for band in range(N_MELS):
        low, centre, high = edges[band : band + 3]
        rising = (frequencies - low) / (centre - low)
        falling = (high - frequencies) / (high - centre)
        filters[band] = np.clip(np.minimum(rising, falling), 0, None)
    return filters


def log_mel(audio: Audio, sample_rate: int = SAMPLE_RATE) -> FloatMatrix:
    """Log-mel power spectrogram in dB, ``(frames, N_MELS)``, frames centred every ``HOP`` samples."""
    padded = np.pad(np.asarray(audio, dtype=np.float64), (N_FFT // 2, N_FFT // 2))
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP] * np.hanning(N_FFT)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    spectrum: FloatMatrix = 10 * np.log10(power @ _mel_filters(sample_rate).T + _EPSILON)
    return spectrum


def _clamped_pair(a: Audio, b: Audio) -> tuple[FloatMatrix, FloatMatrix]:
    if a.size != b.size:
        raise ValueError(f"compared signals must have equal lengths, got {a.size} and {b.size}")
    mel_a, mel_b = log_mel(a), log_mel(b)
    floor = max(mel_a.max(), mel_b.max()) - DYNAMIC_RANGE_DB
    return np.maximum(mel_a, floor), np.maximum(mel_b, floor)


@dataclass(frozen=True, slots=True)
class Comparison:
    """``candidate`` against ``reference`` (both the same segment): all values in dB."""

    distance_db: float  # mean |Δ| over all time-frequency bins
    level_db: float  # difference of overall RMS level (candidate − reference)
    balance_db: float  # largest |Δ| of a mel band's mean level over the utterance
    seam_db: float  # mean per-frame distance on frames touching a join (nan without joins)
    elsewhere_db: float  # the same on every other frame


def compare(candidate: Audio, reference: Audio, joins: Sequence[int] = ()) -> Comparison:
    """Measure ``candidate`` against ``reference``; ``joins`` are sample offsets where windows meet."""
    mel_c, mel_r = _clamped_pair(candidate, reference)
    per_frame = np.abs(mel_c - mel_r).mean(axis=1)
    centres = np.arange(per_frame.size) * HOP
    touching = np.zeros(per_frame.size, dtype=bool)
    for join in joins:
        touching |= np.abs(centres - join) < N_FFT // 2
    rms = [float(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + _EPSILON) for x in (candidate, reference)]
    return Comparison(
        distance_db=float(per_frame.mean()),
        level_db=20 * float(np.log10(rms[0] / rms[1])),
        balance_db=float(np.abs(mel_c.mean(axis=0) - mel_r.mean(axis=0)).max()),
        seam_db=float(per_frame[touching].mean()) if touching.any() else float("nan"),
        elsewhere_db=float(per_frame[~touching].mean()),
    )
