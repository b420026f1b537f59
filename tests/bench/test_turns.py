"""The turns every strategy shares: the AWS-sample baseline's sentence split as it sees a streamed answer,
both halves of a turn run together, and the AWS-sample turn against a server on the fake engine."""

from __future__ import annotations

import asyncio

import pytest

from koe.agent.replay import ReplayPace
from koe.errors import UpstreamError
from koe_bench.turns import Clock, TurnTrace, aws_sample_turn, run_turn, split_sentences
from live_server import LiveServer
from support.fake import fake_seconds

#: Where the stopped clock stands: the turn's end is noted on it.
STOPPED_AT_S = 7.0


class StoppedClock(Clock):
    def now(self) -> float:
        return STOPPED_AT_S


def test_aws_sample_split_waits_for_the_space_after_a_sentence_end() -> None:
    assert split_sentences("Sure. Take the") == (["Sure."], "Take the")
    assert split_sentences("It is 3.5 km away.") == ([], "It is 3.5 km away.")
    assert split_sentences("Go! Now?\n\nThen") == (["Go!", "Now?"], "Then")
    assert split_sentences("") == ([], "")


def test_a_turn_ends_when_both_halves_have_and_its_end_is_noted_on_its_clock() -> None:
    trace = TurnTrace("koe")

    async def writer() -> None:
        trace.tokens.append(0.1)

    async def reader(writing: asyncio.Task[None]) -> None:
        await writing
        trace.segments.append(0.2)

    done = asyncio.run(run_turn(trace, StoppedClock(), writer, reader))
    assert done is trace
    assert (trace.tokens, trace.segments, trace.done_at) == ([0.1], [0.2], STOPPED_AT_S)


def test_a_failing_half_cancels_the_other_and_the_turn_has_no_end() -> None:
    trace = TurnTrace("koe")
    cancelled: list[bool] = []

    async def writer() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def reader(writing: asyncio.Task[None]) -> None:
        raise UpstreamError("the server answered internal_error: boom")

    with pytest.raises(ExceptionGroup) as caught:
        asyncio.run(run_turn(trace, StoppedClock(), writer, reader))
    assert caught.group_contains(UpstreamError, match="internal_error")
    assert cancelled == [True] and trace.done_at == 0.0


def test_each_aws_sample_message_s_audio_is_released_when_all_of_it_is_made(fake_server: LiveServer) -> None:
    answer = "Sure, here is the plan. Take the red line."
    trace = asyncio.run(aws_sample_turn(fake_server.http_url, answer, ReplayPace(200.0, 0.0), "af_heart"))
    assert len(trace.segments) == len(split_sentences(answer + " ")[0]) == 2  # a message per sentence
    assert [chunk.at for chunk in trace.chunks] == trace.segments
    assert sum(chunk.duration_s for chunk in trace.chunks) == pytest.approx(fake_seconds(answer), rel=0.05)
    assert trace.first_sentence_at is not None and trace.done_at >= trace.segments[-1]
