from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from koe.audio.pcm import to_int16, to_pcm16

_finite_float32 = hnp.arrays(
    np.float32, st.integers(0, 256), elements=st.floats(-4, 4, width=32, allow_nan=False)
)


@given(_finite_float32)
def test_samples_in_range_round_to_the_nearest_step_and_outside_clip(audio: np.ndarray) -> None:
    ints = to_int16(audio)
    expected = np.clip(audio.astype(np.float64), -1, 1) * 32767
    assert ints.dtype == np.dtype("<i2")
    assert np.all(np.abs(ints - expected) <= 0.5 + 1e-3)


@given(_finite_float32)
def test_pcm16_is_two_little_endian_bytes_per_sample(audio: np.ndarray) -> None:
    data = to_pcm16(audio)
    assert len(data) == 2 * audio.size
    assert np.array_equal(np.frombuffer(data, dtype="<i2"), to_int16(audio))


def test_full_scale_maps_to_symmetric_extremes() -> None:
    data = to_pcm16(np.array([1.0, -1.0, 0.0, 2.5, -7.0], dtype=np.float32))
    assert data == b"\xff\x7f\x01\x80\x00\x00\xff\x7f\x01\x80"
