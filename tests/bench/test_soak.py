"""A short soak in the test suite: every kind of client, minutes shortened to seconds, against a live server.

The ten-minute run is ``koe soak --minutes 10`` (docs/operations.md has its numbers).
"""

from __future__ import annotations

import asyncio

import pytest

from koe.bench.soak import ACTIONS, rss_bytes, soak
from live_checks import assert_serving, server_tasks, wait_idle
from live_server import ServerFactory

#: Generous for a 24-second run in the test process (which also holds the test's own allocations).
MAX_GROWTH_PCT = 15.0


@pytest.mark.slow
def test_a_short_soak_runs_every_client_kind_without_errors_or_growth(serve_fake: ServerFactory) -> None:
    with serve_fake() as live:
        tasks = server_tasks(live)
        # the server runs in this process, so this process's RSS is the server's
        report = asyncio.run(
            soak(live.http_url, 24.0, rss_bytes, clients=3, warmup_s=8.0, sample_every_s=2.0)
        )
        summary = report.summary()
        assert report.client_failures == {}, summary
        assert report.server_errors == {}, summary
        assert set(report.actions) == {action.__name__ for action in ACTIONS}, summary
        assert report.growth_pct < MAX_GROWTH_PCT, summary
        wait_idle(live, tasks)
        assert_serving(live)
