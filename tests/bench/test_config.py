"""Bench parameters: quick and full defaults, overrides, and refusals (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koe.agent.replay import ReplayPace
from koe.errors import ConfigError
from koe_bench.config import ANSWER, QUICK_ANSWER, BenchConfig


def test_quick_run_is_short_and_full_run_uses_the_long_answer() -> None:
    quick = BenchConfig.for_run(Path("out"), quick=True)
    full = BenchConfig.for_run(Path("out"), quick=False)
    assert (quick.answer, quick.repeats, quick.max_sessions, quick.capacity_rounds) == (QUICK_ANSWER, 1, 2, 1)
    assert (full.answer, full.repeats, full.max_sessions, full.barge_ins, full.capacity_rounds) == (
        ANSWER,
        5,
        8,
        20,
        3,
    )


def test_a_quick_run_reads_a_sample_of_the_corpus_and_a_full_run_all_of_it() -> None:
    assert BenchConfig.for_run(Path("out"), quick=True).reading_sample == 2
    assert BenchConfig.for_run(Path("out"), quick=False).reading_sample is None
    assert BenchConfig.for_run(Path("out"), quick=False, only="reading").only == "reading"


def test_overrides_win_over_the_defaults() -> None:
    pace = ReplayPace(40.0, 0.5)
    config = BenchConfig.for_run(Path("out"), quick=True, pace=pace, repeats=3, ttfa_threshold_s=1.5)
    assert (config.pace, config.repeats, config.ttfa_threshold_s) == (pace, 3, 1.5)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("repeats", 0, "repeats"),
        ("max_sessions", -1, "max_sessions"),
        ("ttfa_threshold_s", 0.0, "threshold"),
        ("hog", -1, "hog"),
        ("vcpu_price", 0.0, "vcpu price"),
    ],
)
def test_out_of_range_values_are_refused_by_name(field: str, value: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BenchConfig.for_run(Path("out"), quick=False, **{field: value})


def test_a_reading_sample_needs_at_least_one_text() -> None:
    with pytest.raises(ConfigError, match="reading_sample"):
        BenchConfig(Path("out"), reading_sample=0)


def test_capacity_needs_at_least_one_round() -> None:
    with pytest.raises(ConfigError, match="capacity_rounds"):
        BenchConfig(Path("out"), capacity_rounds=0)


def test_benchmark_servers_synthesize_every_repeat_instead_of_replaying_it_from_the_segment_cache() -> None:
    from koe_bench.target import bench_settings

    assert bench_settings().segment_cache_mb == 0.0
    assert bench_settings().port == 0
