from __future__ import annotations

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from koe.audio.formats import SUPPORTED_SAMPLE_RATES
from koe.audio.resample import StreamResampler, resample
from koe.types import SAMPLE_RATE, Audio

_OUTPUT_RATES = [rate for rate in SUPPORTED_SAMPLE_RATES if rate != SAMPLE_RATE]
_TONE_HZ = 1000.0
_AMPLITUDE = 0.5


def _tone(rate: int, n: int) -> Audio:
    return (_AMPLITUDE * np.sin(2 * np.pi * _TONE_HZ * np.arange(n) / rate)).astype(np.float32)


def _chirp(n: int) -> Audio:
    t = np.arange(n) / SAMPLE_RATE
    return (0.6 * np.sin(2 * np.pi * (100 * t + 2000 * t**2))).astype(np.float32)


def _stream(resampler: StreamResampler, audio: Audio, bounds: list[int]) -> Audio:
    pieces = [resampler.process(audio[a:b]) for a, b in zip([0, *bounds], [*bounds, audio.size], strict=True)]
    return np.concatenate([*pieces, resampler.flush()])


@settings(max_examples=30, deadline=None)
@given(
    rate=st.sampled_from(_OUTPUT_RATES),
    bounds=st.lists(st.integers(0, SAMPLE_RATE // 2), max_size=40).map(sorted),
)
def test_chunked_resampling_equals_one_shot(rate: int, bounds: list[int]) -> None:
    audio = _chirp(SAMPLE_RATE // 2)
    chunked = _stream(StreamResampler(SAMPLE_RATE, rate), audio, bounds)
    whole = resample(audio, SAMPLE_RATE, rate)
    assert chunked.size == whole.size == audio.size * rate // SAMPLE_RATE
    np.testing.assert_allclose(chunked, whole, atol=1e-5)


def _join_discontinuity(out: Audio, rate: int, input_bounds: np.ndarray) -> tuple[float, float]:
    """Largest sample-to-sample step within two samples of a chunk join, and elsewhere (edges excluded)."""
    steps = np.abs(np.diff(out))
    near = np.zeros(steps.size, dtype=bool)
    for join in np.round(input_bounds * rate / SAMPLE_RATE).astype(int):
        near[max(join - 2, 0) : join + 2] = True
    interior = np.zeros(steps.size, dtype=bool)
    interior[steps.size // 10 : -steps.size // 10] = True
    return float(steps[near & interior].max()), float(steps[~near & interior].max())


@pytest.mark.parametrize("rate", _OUTPUT_RATES)
def test_ten_ms_chunks_join_without_discontinuity(rate: int) -> None:
    chunk = SAMPLE_RATE // 100
    audio = _tone(SAMPLE_RATE, SAMPLE_RATE)
    bounds = np.arange(chunk, audio.size, chunk)
    out = _stream(StreamResampler(SAMPLE_RATE, rate), audio, bounds.tolist())

    at_joins, elsewhere = _join_discontinuity(out, rate, bounds)
    # a sine's largest step depends on where samples fall on it, so allow that jitter and no more
    assert at_joins <= elsewhere * (1 + 1e-3)
    # the stream is the same tone at the new rate everywhere but the filter's start-up and tail
    ideal = _tone(rate, out.size)
    edge = rate // 100
    assert np.abs(out - ideal)[edge:-edge].max() < 1e-3


def test_resetting_state_at_each_chunk_is_caught_as_a_discontinuity() -> None:
    """Control for the test above: resampling each 10 ms chunk on its own does click at the joins."""
    rate, chunk = 8000, SAMPLE_RATE // 100
    audio = _tone(SAMPLE_RATE, SAMPLE_RATE)
    bounds = np.arange(chunk, audio.size, chunk)
    out = np.concatenate([soxr.resample(audio[a : a + chunk], SAMPLE_RATE, rate) for a in [0, *bounds]])
    at_joins, elsewhere = _join_discontinuity(out, rate, bounds)
    assert at_joins > elsewhere * 1.03


def test_same_rate_passes_chunks_through_untouched() -> None:
    audio = _chirp(1000)
    resampler = StreamResampler(SAMPLE_RATE, SAMPLE_RATE)
    assert resampler.process(audio) is audio
    assert resampler.flush().size == 0
    assert resample(audio, SAMPLE_RATE, SAMPLE_RATE) is audio


def test_empty_chunks_and_empty_stream_give_no_samples() -> None:
    resampler = StreamResampler(SAMPLE_RATE, 16000)
    assert resampler.process(np.zeros(0, dtype=np.float32)).size == 0
    assert resampler.flush().size == 0


def test_flush_is_idempotent_and_ends_the_stream() -> None:
    resampler = StreamResampler(SAMPLE_RATE, 16000)
    held = resampler.process(_chirp(2400)).size
    assert held + resampler.flush().size == 1600
    assert resampler.flush().size == 0
    with pytest.raises(ValueError, match=r"after flush"):
        resampler.process(_chirp(10))
