"""How summaries read in the report tables: one way for every table, the same text for the same figures."""

from __future__ import annotations

from typing import Any

from koe_bench.tables import MISSING, gaps, seconds, strategy_rows


def summary(median: float | None, p95: float | None = None, top: float = 9.0) -> dict[str, Any]:
    return {"n": 3, "median": median, "p95": p95, "min": 0.0, "max": top}


def test_a_figure_reads_in_seconds_to_the_hundredth() -> None:
    assert seconds(summary(1.234)) == "1.23"
    assert seconds(summary(1.0, top=2.346), "max") == "2.35"


def test_a_missing_summary_or_figure_reads_as_a_dash() -> None:
    assert seconds(None) == MISSING
    assert seconds(summary(1.0), "p95") == MISSING
    assert seconds(summary(None)) == MISSING


def test_gaps_read_as_the_median_and_the_most_in_any_run() -> None:
    assert gaps({"median": 0.0, "max": 3.0}) == "0 (3)"
    assert gaps({"median": 1.5, "max": 2.0}) == "1.5 (2)"


def test_a_row_per_strategy_of_each_scenario_in_the_file_s_order() -> None:
    scenarios = {
        "streamed": {"strategies": {"koe": summary(0.5), "peer": summary(1.0)}, "ratios": {}},
        "whole": {"strategies": {"koe": summary(0.25)}},
    }
    rows = strategy_rows(scenarios, lambda s: (seconds(s), "x"))
    assert rows == [
        ("streamed", "koe", "0.50", "x"),
        ("streamed", "peer", "1.00", "x"),
        ("whole", "koe", "0.25", "x"),
    ]
