"""Apps on a model that is warm already (one the tests share): the server neither proves nor measures it
before ``/ping`` is 200 and plans with the default costs, so a test's server is ready in milliseconds.
koe's own start always warms up; only tests skip it, so the switch lives here, not in the settings."""

from __future__ import annotations

from concurrent.futures import Future

from starlette.applications import Starlette

from koe.agent.config import LLMConfig
from koe.app import create_app
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost
from koe.settings import Settings


def warm_app(
    settings: Settings,
    speech: Speech | None = None,
    llm: LLMConfig | None = None,
    loading: Future[Speech] | None = None,
) -> Starlette:
    """:func:`koe.app.create_app` without the warm-up."""
    return create_app(settings, speech, llm, loading, cost=SegmentCost())
