"""The capacity ladder's logic on the scripted fake engine: a real server, real koe clients."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from koe.agent.replay import ReplayPace
from koe_bench import capacity, report
from koe_bench.config import BenchConfig
from live_server import ServerFactory

#: A short answer streamed fast: each level takes a second or two on the fake engine.
ANSWER = "Sure, here it is. The fake engine speaks every word of this answer in order."
PACE = ReplayPace(tokens_per_s=200.0, first_token_delay_s=0.02)


def _config(tmp_path: Path, **overrides: object) -> BenchConfig:
    config = BenchConfig(tmp_path, answer=ANSWER, pace=PACE, max_sessions=2, capacity_rounds=1)
    return replace(config, **overrides)


def test_the_ladder_climbs_while_levels_pass_and_reports_each(
    serve_fake: ServerFactory, tmp_path: Path
) -> None:
    done: list[int] = []
    with serve_fake() as server:
        result = asyncio.run(capacity.ladder(server.http_url, _config(tmp_path), lambda: done.append(1)))
    assert [level["sessions"] for level in result["levels"]] == [1, 2]
    assert all(level["ok"] and level["rounds"] == 1 for level in result["levels"])
    assert result["max_sessions_ok"] == 2 and not result["stopped_early"]
    assert len(done) == 2  # the progress callback, once a level
    table = report.capacity_section(result)
    assert [row[0] for row in table.rows] == ["1", "2"]
    assert table.notes == ["largest smooth load: 2 sessions"]


def test_the_ladder_stops_at_the_first_level_that_fails(serve_fake: ServerFactory, tmp_path: Path) -> None:
    with serve_fake() as server:
        # no first audio comes within a nanosecond of the first sentence: level 1 fails, 2 is not tried
        result = asyncio.run(capacity.ladder(server.http_url, _config(tmp_path, ttfa_threshold_s=1e-9)))
    assert [level["sessions"] for level in result["levels"]] == [1]
    assert result["max_sessions_ok"] is None and result["stopped_early"]
    assert report.capacity_section(result).notes == ["no level tried was smooth and prompt"]
