"""The benchmark's arithmetic: simulated listener, summaries, line fit, a capacity round (no model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe_bench.capacity import round_passes
from koe_bench.stats import MIN_GAP_S, SPEECH_LEVEL, Chunk, fit_line, onset_s, simulate_playback, summarize
from koe_bench.turns import PcmReader, TurnTrace, pcm_chunk


def test_listener_starts_at_first_audio_and_counts_each_underrun() -> None:
    # 1 s of audio at t=2, the next at t=4 (1 s late), the next at t=4.5 (in time: speaker busy until 5)
    playback = simulate_playback([Chunk(4.5, 0.5), Chunk(2.0, 1.0), Chunk(4.0, 1.0)])
    assert playback.starts_at == 2.0
    assert playback.gaps == ((3.0, 4.0),)
    assert playback.played == ((2.0, 3.0), (4.0, 5.5))
    assert playback.ends_at == 5.5
    assert (playback.gap_count, playback.gap_total_s, playback.max_gap_s) == (1, 1.0, 1.0)


def test_audio_arriving_ahead_of_the_speaker_leaves_no_gap() -> None:
    playback = simulate_playback([Chunk(0.0, 0.1), Chunk(0.01, 0.1), Chunk(0.02, 0.1)])
    assert playback.gap_count == 0
    assert playback.played == ((0.0, pytest.approx(0.3)),)


def test_underruns_below_the_noise_floor_are_not_gaps() -> None:
    playback = simulate_playback([Chunk(0.0, 0.1), Chunk(0.1 + MIN_GAP_S / 2, 0.1)])
    assert playback.gap_count == 0


def test_onset_is_the_first_sample_loud_enough_to_be_speech() -> None:
    samples = np.zeros(1000)
    samples[:300] = SPEECH_LEVEL / 10  # a lead-in's noise floor
    samples[300] = -SPEECH_LEVEL * 2
    assert onset_s(samples, 100) == 3.0
    assert onset_s(np.zeros(10), 100) is None


def test_first_speech_is_where_the_listener_hears_the_voice_after_earlier_silence() -> None:
    # silence arrives first and plays from t=1; the chunk with speech 0.25 s in plays from t=1.5
    playback = simulate_playback([Chunk(1.0, 0.5, None), Chunk(1.2, 1.0, 0.25), Chunk(1.3, 1.0, 0.0)])
    assert playback.starts_at == 1.0
    assert playback.first_speech_at == 1.75


def test_a_wait_inside_the_silence_before_speech_is_a_later_start_not_a_gap() -> None:
    # 0.3 s of lead-in silence plays from t=1; its first speech arrives at 1.5 (a 0.2 s wait, heard as
    # silence), then the next speech only at 3.0, after the first has played out at 2.5
    playback = simulate_playback([Chunk(1.0, 0.3, None), Chunk(1.5, 1.0, 0.0), Chunk(3.0, 1.0, 0.0)])
    assert playback.gaps == ((1.3, 1.5), (2.5, 3.0))
    assert playback.first_speech_at == 1.5
    assert playback.heard_gaps == ((2.5, 3.0),)
    assert (playback.gap_count, playback.gap_total_s, playback.max_gap_s) == (1, 0.5, 0.5)


def test_a_pcm_stream_split_inside_a_sample_loses_nothing() -> None:
    pcm = (np.arange(1, 2401, dtype="<i2") * 10).tobytes()  # 0.1 s at 24 kHz, loud from sample 0 on
    trace = TurnTrace("split")
    reader = PcmReader(trace, starts_at=0.0)
    for start in range(0, len(pcm), 999):  # odd sizes: samples split across reads
        reader.add(pcm[start : start + 999])
    assert sum(c.duration_s for c in trace.chunks) == pytest.approx(0.1)
    assert pcm_chunk(0.0, pcm).onset_s is not None


def test_no_audio_means_no_playback() -> None:
    playback = simulate_playback([Chunk(1.0, 0.0)])
    assert (playback.starts_at, playback.ends_at, playback.played, playback.gaps) == (None, None, (), ())


@given(st.lists(st.tuples(st.floats(0, 30), st.floats(0.001, 3)), min_size=1, max_size=40))
def test_listener_plays_everything_once_and_sound_and_silence_tile_the_time(
    chunks: list[tuple[float, float]],
) -> None:
    playback = simulate_playback([Chunk(at, d) for at, d in chunks])
    heard = sum(b - a for a, b in playback.played)
    assert heard == pytest.approx(sum(d for _, d in chunks))
    assert playback.starts_at == min(at for at, _ in chunks)
    assert playback.ends_at is not None
    assert heard + playback.gap_total_s <= playback.ends_at - playback.starts_at + 1e-6
    spans = sorted([*playback.played, *playback.gaps])
    assert all(b1 <= a2 + 1e-9 for (_, b1), (a2, _) in itertools.pairwise(spans))


def test_p95_appears_only_from_twenty_samples() -> None:
    assert summarize([float(i) for i in range(19)]).p95 is None
    many = summarize([float(i) for i in range(1, 21)])
    assert many.p95 == pytest.approx(19.05)
    assert (many.n, many.median, many.min, many.max) == (20, 10.5, 1.0, 20.0)


def test_summary_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        summarize([])


def test_line_fit_recovers_intercept_and_slope() -> None:
    fit = fit_line([10, 20, 40], [0.2 + 0.01 * x for x in (10, 20, 40)])
    assert fit.intercept == pytest.approx(0.2)
    assert fit.slope == pytest.approx(0.01)
    assert fit.r2 == pytest.approx(1.0)
    with pytest.raises(ValueError, match="distinct"):
        fit_line([5, 5], [1.0, 2.0])


def _turn(first_sentence_at: float, chunks: list[tuple[float, float]]) -> TurnTrace:
    trace = TurnTrace("koe", first_sentence_at=first_sentence_at)
    trace.chunks = [Chunk(at, duration) for at, duration in chunks]
    return trace


def test_a_capacity_round_fails_on_any_underrun_or_a_late_first_audio() -> None:
    prompt = _turn(1.0, [(1.8, 2.0), (3.5, 2.0)])  # 0.8 s after the sentence, audio always ahead
    late = _turn(1.0, [(2.9, 2.0), (4.5, 2.0)])  # 1.9 s after the sentence
    stutters = _turn(1.0, [(1.8, 1.0), (3.8, 2.0)])  # runs dry from 2.8 s to 3.8 s
    assert round_passes([prompt, prompt], threshold_s=1.5)
    assert not round_passes([prompt, late], threshold_s=1.5)
    assert not round_passes([prompt, stutters], threshold_s=1.5)
