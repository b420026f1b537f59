"""The composition root of ``koe serve``: the TTS server, the voice agent speaking through it, the page.

The server and the agent never import each other; this module builds one runtime and hands the agent's
routes, the page and the agent's clean-up to the server app.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from koe.agent.config import HOW_TO_ENABLE, LLMConfig
from koe.agent.inprocess import InProcessSpeaker
from koe.agent.routes import AgentEndpoints
from koe.agent.service import VoiceAgent
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost
from koe.server.access import warn_if_exposed
from koe.server.app import create_server_app
from koe.server.runtime import Runtime
from koe.server.serve import uvicorn_config
from koe.settings import Settings
from koe.web import page, page_paths

logger = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    speech: Speech | None = None,
    llm: LLMConfig | None = None,
    loading: Future[Speech] | None = None,
    *,
    cost: SegmentCost | None = None,
) -> Starlette:
    """The koe ASGI app.

    Args:
        settings: limits and options (default: from ``KOE_*`` environment variables).
        speech: an already loaded model to share (tests, benchmarks); loaded in the background if absent.
        llm: the agent's LLM (default: from ``KOE_LLM*`` environment variables).
        loading: the model of ``settings``, already loading (:func:`koe.server.runtime.load_in_background`).
        cost: the segment costs to plan with, known already (tests sharing one warm model): the model is
            then neither proven nor measured before it serves (:class:`koe.server.runtime.Runtime`).

    Raises:
        ConfigError: the settings or the ``KOE_LLM*`` variables are invalid.
    """
    runtime = Runtime(settings or Settings.from_env(), speech, loading, cost=cost)
    config = llm or LLMConfig.from_env()
    if config.kind == "none":
        logger.warning("agent: %s; the page's read-aloud mode works without one", HOW_TO_ENABLE)
    else:
        logger.info("agent LLM: %s", config.describe())
    agent = AgentEndpoints(VoiceAgent(InProcessSpeaker(runtime), config))
    return create_server_app(
        runtime,
        extra_routes=[Mount("/agent", routes=agent.routes()), *page()],
        open_paths=page_paths(),
        on_close=agent.aclose,
    )


def serve(settings: Settings, loading: Future[Speech] | None = None, llm: LLMConfig | None = None) -> None:
    """Serve until SIGTERM/SIGINT: stop accepting, close sessions (1012), drain HTTP within the grace;
    ``loading``: the model, already loading; ``llm``: the agent's (default: from ``KOE_LLM*``)."""
    warn_if_exposed(settings)
    uvicorn.Server(uvicorn_config(create_app(settings, llm=llm, loading=loading), settings)).run()
