from __future__ import annotations

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from koe.audio.formats import SUPPORTED_SAMPLE_RATES
from koe.audio.resample import StreamResampler, output_samples, resample
from koe.pipeline.seams import FADE_SAMPLES
from koe.types import SAMPLE_RATE, Audio

_OUTPUT_RATES = [rate for rate in SUPPORTED_SAMPLE_RATES if rate != SAMPLE_RATE]
_TONE_HZ = 1000.0
_AMPLITUDE = 0.5
#: 0.2 s: a whole number of samples at every rate, so a cut stream can be compared with the uncut one.
_SEGMENT = SAMPLE_RATE // 5
#: How far cutting at a silent join may move any sample (measured: at most 1.2e-4, at 8 kHz) — and cutting
#: inside a tone moves samples by 4.7e-3 to 3.9e-2 (the control below).
_CUT_TOLERANCE = 1e-3


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


@settings(max_examples=30, deadline=None)
@given(
    rate=st.sampled_from(_OUTPUT_RATES),
    pieces=st.lists(st.lists(st.integers(0, 3000), min_size=1, max_size=4), min_size=1, max_size=6),
)
def test_after_each_cut_the_output_is_the_input_so_far_to_the_sample(
    rate: int, pieces: list[list[int]]
) -> None:
    """Each piece (chunks of any size, then a cut) is a segment: it ends with its own last sample, however
    many came before, so a segment's length never drifts by a filter delay or a rounding."""
    resampler, taken, given = StreamResampler(SAMPLE_RATE, rate), 0, 0
    for chunks in pieces:
        for size in chunks:
            given += resampler.process(_chirp(size)).size
            taken += size
        given += resampler.cut().size
        assert given == output_samples(taken, SAMPLE_RATE, rate)
    assert resampler.flush().size == 0


def _seam_segments(count: int) -> list[Audio]:
    """Tones that fade in and out as koe's segments do at their joins (:mod:`koe.pipeline.seams`)."""
    ramp = np.arange(FADE_SAMPLES, dtype=np.float32) / FADE_SAMPLES
    segment = _tone(SAMPLE_RATE, _SEGMENT)
    segment[:FADE_SAMPLES] *= ramp
    segment[-FADE_SAMPLES:] *= ramp[::-1]
    return [segment] * count


def _cut_stream(rate: int, segments: list[Audio]) -> Audio:
    resampler = StreamResampler(SAMPLE_RATE, rate)
    out = [
        np.concatenate(
            [resampler.process(s[: s.size // 3]), resampler.process(s[s.size // 3 :]), resampler.cut()]
        )
        for s in segments
    ]
    return np.concatenate([*out, resampler.flush()])


@pytest.mark.parametrize("rate", _OUTPUT_RATES)
def test_cuts_at_silent_joins_leave_the_stream_as_it_was(rate: int) -> None:
    segments = _seam_segments(5)
    cut = _cut_stream(rate, segments)
    whole = resample(np.concatenate(segments), SAMPLE_RATE, rate)
    assert cut.size == whole.size
    assert np.abs(cut - whole).max() < _CUT_TOLERANCE


def test_a_cut_inside_a_tone_is_caught_by_the_check_above() -> None:
    """Control: the fresh filter after a cut does not see the audio before it; inside a tone that clicks."""
    rate = 22050  # the rate where a cut inside a tone moves samples least
    segments = np.split(_tone(SAMPLE_RATE, 5 * _SEGMENT), 5)
    cut = _cut_stream(rate, segments)
    whole = resample(np.concatenate(segments), SAMPLE_RATE, rate)
    assert np.abs(cut - whole).max() > _CUT_TOLERANCE


def test_same_rate_passes_chunks_through_untouched() -> None:
    audio = _chirp(1000)
    resampler = StreamResampler(SAMPLE_RATE, SAMPLE_RATE)
    assert resampler.process(audio) is audio
    assert resampler.cut().size == 0
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
    with pytest.raises(ValueError, match=r"after flush"):
        resampler.cut()
