"""An LLM whose answer a test holds: an OpenAI-compatible chat-completions server (imported as
``support.llm``) that streams the first part of its answer, then waits until the test releases the rest.

"Audio came before the answer was written" is then an ordering a test can see on any machine, however
busy: the audio arrives while the rest is still held, or the test waits for it in vain.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from koe.agent.config import LLMConfig
from koe.agent.replay import tokenize
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, run_server
from support.fake import FakeEngine, fake_speech
from support.warm import warm_app
from ws_events import WAIT_S

MODEL = "held"


class HeldLLM:
    """Answers every chat completion with ``first`` then, once :attr:`release` is set, ``rest``.

    ``abandoned`` counts answers whose client left before the end (a closed stream: a barge-in).
    """

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.release = threading.Event()
        self.answers = 0
        self.abandoned = 0

    @property
    def answer(self) -> str:
        return self.first + self.rest

    async def _chunks(self) -> AsyncIterator[str]:
        self.answers += 1
        finished = False
        try:
            for token in tokenize(self.first):
                yield _chunk(token)
            await anyio.to_thread.run_sync(self.release.wait, WAIT_S, abandon_on_cancel=True)
            for token in tokenize(self.rest):
                yield _chunk(token)
            yield "data: [DONE]\n\n"
            finished = True
        finally:
            if not finished:
                self.abandoned += 1

    async def _completions(self, request: Request) -> StreamingResponse:
        await request.body()
        return StreamingResponse(self._chunks(), media_type="text/event-stream")

    @contextmanager
    def serving(self) -> Iterator[LLMConfig]:
        """Serve on a free loopback port; yields the agent's LLM configuration pointing at it."""
        app = Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])])
        settings = Settings(host=LOOPBACK, port=0)
        try:
            with run_server(app, settings, wait_ready=False) as live:
                yield LLMConfig("openai", model=MODEL, base_url=live.http_url + "/v1", api_key="none")
        finally:
            self.release.set()  # no worker thread is left waiting after the server has gone


@contextmanager
def serve_agent(llm: LLMConfig, engine: FakeEngine | None = None) -> Iterator[LiveServer]:
    """``koe serve``'s app on the fake engine with ``llm`` as the agent's LLM, ready."""
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(warm_app(settings, fake_speech(engine), llm), settings) as live:
        yield live


def _chunk(content: str) -> str:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    chunk = {
        "id": MODEL,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [choice],
    }
    return f"data: {json.dumps(chunk)}\n\n"
