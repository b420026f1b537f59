"""How the summaries of a result file read in a report table, written the same way in every table: a
figure of a summary (:class:`~koe_bench.stats.Summary` as the file holds it) in seconds, a gap count as its
median and worst, and a row per strategy of each scenario."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: What a cell holds where there is nothing to show (a measurement no run made).
MISSING = "—"


def seconds(summary: Mapping[str, Any] | None, figure: str = "median") -> str:
    """``summary``'s ``figure`` to the hundredth; :data:`MISSING` without a summary or that figure."""
    if summary is None or summary.get(figure) is None:
        return MISSING
    return f"{summary[figure]:.2f}"


def gaps(summary: Mapping[str, Any]) -> str:
    """A gap count's median and, in brackets, its most in any one run."""
    return f"{summary['median']:g} ({summary['max']:g})"


def strategy_rows(
    scenarios: Mapping[str, Any], cells: Callable[[Mapping[str, Any]], tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """A row per strategy of each scenario (``scenarios[name]["strategies"]``): the scenario's name, the
    strategy's, then the ``cells`` of the strategy's summaries."""
    return [
        (scenario, name, *cells(summaries))
        for scenario, result in scenarios.items()
        for name, summaries in result["strategies"].items()
    ]
