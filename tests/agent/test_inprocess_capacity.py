"""The page agent's sessions are listeners like any other (koe.agent.inprocess): each is checked by the
server's admission at its first turn, and counted while a turn is open, on a scripted meter."""

from __future__ import annotations

import asyncio

import pytest

from koe.agent.inprocess import InProcessSpeaker
from koe.errors import OverloadedError
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.capacity import OVER_CAPACITY, AudioPerCpu, Capacity
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from support.agent import Loaded, Metrics
from support.fake import FakeEngine, fake_speech


def test_an_agent_session_is_counted_while_its_turn_is_open_and_refused_past_the_share() -> None:
    # one core making 2 audio-seconds per CPU-second: 0.6 of it carries one listener, not two
    capacity = Capacity(1, 0.6, lambda: 1.0, AudioPerCpu(lambda: 0.0, value=2.0))

    async def main() -> None:
        scheduler = Scheduler(2, 64)
        synthesizer = Synthesizer(fake_speech(FakeEngine()), scheduler, SegmentCost(), Metrics())
        speaker = InProcessSpeaker(Loaded(synthesizer, capacity))
        first, second = await speaker.session(), await speaker.session()
        try:
            answer = await first.turn("af_heart", 1.0)
            assert capacity.speaking == 1
            with pytest.raises(OverloadedError) as refused:
                await second.turn("af_heart", 1.0)
            assert refused.value.code == OVER_CAPACITY and capacity.speaking == 1
            await answer.aclose()
            assert capacity.speaking == 0
            admitted = await second.turn("af_heart", 1.0)  # alone now: admitted
            again = await first.turn("af_heart", 1.0)  # an admitted session's next turn: never refused
            assert capacity.speaking == 2
            for turn in (admitted, again):
                await turn.aclose()
            assert (capacity.speaking, capacity.refused) == (0, 1)
        finally:
            await scheduler.aclose(5.0)

    asyncio.run(main())
