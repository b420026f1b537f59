"""A short soak in the test suite: every kind of client, minutes shortened to seconds, against a live server.

The ten-minute run is ``koe soak --minutes 10`` (docs/operations.md has its numbers).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from koe.bench.soak import ACTIONS, MAX_GROWTH_PCT, rss_bytes, soak
from live_checks import wait_for
from support.fake_serve import fake_serve_process


@pytest.mark.slow
def test_a_short_soak_runs_every_client_kind_without_errors_or_growth(tmp_path: Path) -> None:
    """The server is ``koe serve`` in its own process (on the fake engine), so its memory is measured alone,
    against the same target as ``koe soak`` and docs/operations.md."""
    with fake_serve_process(tmp_path / "serve.log") as (server, url):
        report = asyncio.run(
            soak(url, 24.0, lambda: rss_bytes(server.pid), clients=3, warmup_s=8.0, sample_every_s=2.0)
        )
        summary = report.summary()
        assert report.client_failures == {}, summary
        assert report.server_errors == {}, summary
        assert set(report.actions) == {action.__name__ for action in ACTIONS}, summary
        assert report.growth_pct < MAX_GROWTH_PCT, summary
        assert report.passed, summary
        # and idle afterwards: no session, request or job left behind
        wait_for(lambda: _idle(url), "the server to be idle after the soak")


def _idle(url: str) -> bool:
    busy = ("koe_active_sessions", "koe_queue_depth", "koe_jobs_running")
    families = text_string_to_metric_families(httpx.get(url + "/metrics").text)
    return all(sample.value == 0 for f in families if f.name in busy for sample in f.samples)
