"""The voice agent's pipeline on the fake engine, for the agent's tests: a recording LLM source and a
session on a real scheduler (imported as ``support.agent``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TypeVar

from koe.agent.base import Message
from koe.agent.inprocess import InProcessSpeaker
from koe.agent.pipeline import AgentOptions, AgentSession, SpeakerOpener
from koe.agent.replay import ReplayPace, ReplaySource, tokenize
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.capacity import Capacity
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from support.fake import FakeEngine, fake_speech

T = TypeVar("T")
#: How long a held answer waits for its release: a test that never releases it fails then.
HOLD_S = 30.0


class RecordingSource:
    """A real replay source that also records the conversations it was given and whether it was closed.

    ``simulated=False`` makes it stand for an LLM: a scripted token stream the agent treats as a model's.
    """

    def __init__(self, text: str, tokens_per_s: float = 20.0, *, simulated: bool = True) -> None:
        self.simulated = simulated
        self.label = "replay (simulation, recorded)" if simulated else "scripted LLM (recorded)"
        self._inner = ReplaySource(text, ReplayPace(tokens_per_s, 0.0))
        self.asked: list[list[Message]] = []
        self.closed = False
        self.finished = False

    async def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        self.asked.append(list(messages))
        try:
            async for token in self._inner.stream(messages):
                yield token
            self.finished = True
        finally:
            self.closed = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class HeldSource:
    """An LLM that writes ``first`` at once, then holds the rest of its answer until :attr:`release` is set:
    what happens before the release happened while the answer was still being written."""

    simulated = True
    label = "held (simulation)"

    def __init__(self, first: str, rest: str) -> None:
        self._parts = (first, rest)
        self.release = asyncio.Event()
        self.closed = False
        self.finished = False

    async def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        try:
            for held, part in zip((False, True), self._parts, strict=True):
                if held:
                    await asyncio.wait_for(self.release.wait(), HOLD_S)
                for token in tokenize(part):
                    await asyncio.sleep(0)
                    yield token
            self.finished = True
        finally:
            self.closed = True

    async def aclose(self) -> None:
        """Nothing to release."""


class Metrics:
    """The pipeline's observer, counting what it is told."""

    def __init__(self) -> None:
        self.segments = 0
        self.transports: list[str] = []

    def synthesized(self, took_s: float, audio_s: float) -> None:
        self.segments += 1

    def first_audio(self, transport: str, latency_s: float) -> None:
        self.transports.append(transport)


class Loaded:
    """The agent's view of a loaded model (what the server's runtime gives it)."""

    ready = True

    def __init__(self, synthesizer: Synthesizer, capacity: Capacity | None = None) -> None:
        self._synthesizer = synthesizer
        #: no admission by the machine's speed unless given one (the server's tests it)
        self.capacity = capacity or Capacity(2, 0.0, lambda: 1.0)

    def synthesizer(self) -> Synthesizer:
        return self._synthesizer


def with_session(
    main: Callable[[AgentSession, Synthesizer], Awaitable[T]], open_speaker: SpeakerOpener | None = None
) -> T:
    async def run() -> T:
        synthesizer = Synthesizer(
            fake_speech(FakeEngine(delay_s=0.01)), Scheduler(2, 64), SegmentCost(), Metrics()
        )
        session = AgentSession(AgentOptions(), open_speaker or InProcessSpeaker(Loaded(synthesizer)).session)
        try:
            async with asyncio.timeout(60):
                return await main(session, synthesizer)
        finally:
            await session.aclose()
            await synthesizer.scheduler.aclose(5.0)

    return asyncio.run(run())
