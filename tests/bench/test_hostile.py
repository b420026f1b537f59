"""The soak's hostile clients, each run once against a live server: every attack gets its documented
answer, nothing fails inside the server, and it serves on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from koe.settings import Settings
from koe_bench.hostile import HOSTILE_ACTIONS, SERVER_ENV, Action
from live_checks import assert_serving, failures_logged, metric
from live_server import LiveServer, ServerFactory

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def attacked(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    deadlines = Settings.from_env(SERVER_ENV)
    limits = {
        name: getattr(deadlines, name)
        for name in ("header_timeout_s", "body_timeout_s", "send_timeout_s", "idle_timeout_s")
    }
    with failures_logged() as failures, serve_fake(**limits) as live:
        yield live
        assert metric(live, 'koe_errors_total{code="internal_error"}') == 0
        assert_serving(live)
    assert [record.getMessage() for record in failures] == []


@pytest.mark.parametrize("action", HOSTILE_ACTIONS, ids=[action.__name__ for action in HOSTILE_ACTIONS])
def test_each_attack_gets_its_documented_answer(attacked: LiveServer, action: Action) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            await asyncio.wait_for(action(attacked.http_url, http), 60)

    asyncio.run(main())
