"""The voice-agent pipeline speaking in this process: streaming, barge-in, history, failures.

The LLM here is the replay simulation (deterministic text at a set rate), wrapped to record what it was
asked and when its stream was closed; TTS is the pipeline on a real scheduler with the scripted fake engine.
"""

from __future__ import annotations

from collections.abc import Callable

from koe.agent.base import Message, SpeakerSession, SpeakerTurn
from koe.agent.events import AgentEvent, AudioReady, SegmentReady, TextDelta, TurnDone, TurnError, TurnStarted
from koe.agent.openai_compatible import OpenAICompatibleSource, OpenAIOptions
from koe.agent.pipeline import AgentSession, AgentTurn
from koe.pipeline.synthesizer import Synthesizer
from live_server import loopback_socket
from support.agent import HeldSource, RecordingSource, with_session

ANSWER = (
    "Cats like quiet places to sleep. They also enjoy climbing high shelves to watch the room. "
    "Most of all they want a warm lap."
)


async def until(
    session: AgentSession, turn: AgentTurn, stop: Callable[[AgentEvent], bool]
) -> list[AgentEvent]:
    events = []
    async for event in session.events(turn):
        events.append(event)
        if stop(event):
            break
    return events


def test_an_answer_is_spoken_while_it_is_still_being_written() -> None:
    """The LLM holds all but the first sentence until the first audio is out."""
    first_sentence = ANSWER[: ANSWER.index(".") + 2]
    source = HeldSource(first_sentence, ANSWER[len(first_sentence) :])

    async def main(session: AgentSession, synthesizer: Synthesizer) -> list[AgentEvent]:
        turn = await session.start("Tell me about cats.", source)
        events = []
        async for event in session.events(turn):
            events.append(event)
            if isinstance(event, AudioReady) and not source.release.is_set():
                written = "".join(e.text for e in events if isinstance(e, TextDelta))
                assert written == first_sentence  # heard while the rest was still unwritten
                source.release.set()
        return events

    events = with_session(main)
    assert source.release.is_set()
    assert isinstance(events[0], TurnStarted) and events[0].simulated
    assert isinstance(events[-1], TurnDone) and not events[-1].interrupted
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    segments = [e for e in events if isinstance(e, SegmentReady)]
    assert [s.index for s in segments] == list(range(len(segments))) and len(segments) >= 2
    assert all(ANSWER[s.source_span[0] : s.source_span[1]] == s.text for s in segments)
    audio = [e for e in events if isinstance(e, AudioReady)]
    indices = [a.index for a in audio]  # one event per segment, or its pieces (decoded in windows) in order
    assert indices == sorted(indices) and list(dict.fromkeys(indices)) == [s.index for s in segments]
    assert events[-1].audio_s == round(sum(len(a.pcm) for a in audio) / 48000, 3)
    timings = events[-1].timings
    assert timings.first_token_ms is not None and timings.first_audio_ms is not None
    assert timings.first_token_ms < timings.first_audio_ms < timings.total_ms  # type: ignore[operator]
    assert events[-1].text == ANSWER


def test_a_turn_that_fails_unexpectedly_still_tells_its_client_and_ends() -> None:
    class Broken:
        async def turn(self, voice: str, speed: float, lang: str | None = None) -> SpeakerTurn:
            raise RuntimeError("a bug in the TTS")

        async def aclose(self) -> None:
            pass

    async def opener() -> SpeakerSession:
        return Broken()

    async def main(session: AgentSession, synthesizer: Synthesizer) -> list[AgentEvent]:
        turn = await session.start("Hello?", RecordingSource("Hi."))
        return [event async for event in session.events(turn)]

    events = with_session(main, opener)
    assert [type(e) for e in events] == [TurnStarted, TurnError, TurnDone]
    assert isinstance(events[1], TurnError) and events[1].code == "internal_error"


def test_interrupt_stops_audio_closes_the_llm_trims_history_and_the_next_question_works() -> None:
    first_sentence = ANSWER[: ANSWER.index(".") + 2]
    first = HeldSource(first_sentence, ANSWER[len(first_sentence) :])  # never released: cut mid-answer
    second = RecordingSource("Sure. Ask away.")

    async def main(session: AgentSession, synthesizer: Synthesizer) -> tuple[list[AgentEvent], ...]:
        turn = await session.start("Tell me about cats.", first)
        before = await until(session, turn, lambda e: isinstance(e, AudioReady))
        interrupted = await session.interrupt(heard_segments=1)
        after = [event async for event in session.events(turn)]
        assert interrupted is not None and synthesizer.scheduler.stats.queued == 0
        segment = next(e for e in before if isinstance(e, SegmentReady))
        assert interrupted.heard_text == ANSWER[: segment.source_span[1]]
        history = list(session.history)
        next_turn = await session.start("Another question?", second)
        return before, after, history, [event async for event in session.events(next_turn)]

    _, after, history, answered = with_session(main)
    assert first.closed and not first.finished  # the LLM stream was closed mid-answer
    assert len(after) == 1 and isinstance(after[0], TurnDone) and after[0].interrupted  # no audio after
    heard = after[0].text
    assert ANSWER.startswith(heard) and 0 < len(heard) < len(ANSWER)
    assert history == [Message("user", "Tell me about cats."), Message("assistant", heard)]
    asked = second.asked[0]
    assert [m.role for m in asked] == ["system", "user", "assistant", "user"]
    assert asked[2].content == heard  # the LLM is told only what the listener heard
    assert isinstance(answered[-1], TurnDone) and not answered[-1].interrupted
    assert any(isinstance(e, AudioReady) for e in answered)


def test_a_new_question_barges_in_on_the_answer_being_spoken() -> None:
    first = HeldSource(ANSWER[:5], ANSWER[5:])  # never released: cut mid-answer

    async def main(
        session: AgentSession, synthesizer: Synthesizer
    ) -> tuple[list[AgentEvent], list[AgentEvent]]:
        turn = await session.start("Tell me about cats.", first)
        await until(session, turn, lambda e: isinstance(e, TextDelta))
        nothing_heard = await session.start("Never mind. Dogs?", RecordingSource("Dogs are loyal."))
        return [e async for e in session.events(turn)], [e async for e in session.events(nothing_heard)]

    old, new = with_session(main)
    assert first.closed and not first.finished
    assert [type(e) for e in old] == [TurnDone] and old[0].interrupted and old[0].text == ""
    assert isinstance(new[-1], TurnDone) and new[-1].text == "Dogs are loyal."


def test_an_unreachable_llm_is_reported_and_the_turn_still_ends() -> None:
    with loopback_socket() as sock:
        port = sock.getsockname()[1]  # closed again: nothing listens there

    async def main(session: AgentSession, synthesizer: Synthesizer) -> tuple[list[AgentEvent], list[Message]]:
        options = OpenAIOptions("any", f"http://127.0.0.1:{port}/v1", "key", timeout_s=5)
        source = OpenAICompatibleSource(options)
        turn = await session.start("Hello?", source)
        events = [e async for e in session.events(turn)]
        await source.aclose()
        return events, session.history

    events, history = with_session(main)
    kinds = [type(e) for e in events]
    assert kinds == [TurnStarted, TurnError, TurnDone]
    error = events[1]
    assert isinstance(error, TurnError) and error.code == "upstream_error" and str(port) in error.message
    assert history == []  # nothing was said, so the exchange is not kept


LOOPING = (
    "Pack water and snacks. Don't forget your camera. Don't forget your camera. Wear good boots. "
    "Bring a map. Have fun out there."
)


def answer_of(source: RecordingSource) -> tuple[list[AgentEvent], list[Message]]:
    async def main(session: AgentSession, synthesizer: Synthesizer) -> tuple[list[AgentEvent], list[Message]]:
        turn = await session.start("What should I pack for a hike?", source)
        return [event async for event in session.events(turn)], session.history

    return with_session(main)


def test_an_llm_answer_is_spoken_in_whole_sentences_none_twice_and_its_stream_closed_at_the_limit() -> None:
    source = RecordingSource(LOOPING, tokens_per_s=500, simulated=False)
    events, history = answer_of(source)
    said = "Pack water and snacks. Don't forget your camera. Wear good boots."  # the limit: 3 sentences
    # each sentence goes with the spacing after it, which proves its end to the TTS's segmenter
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == said + " "
    assert isinstance(events[-1], TurnDone) and events[-1].text == said + " " and not events[-1].interrupted
    assert "".join(e.text for e in events if isinstance(e, SegmentReady)).replace(" ", "") == said.replace(
        " ", ""
    )
    assert source.closed and not source.finished  # the LLM was stopped, not read to its end
    assert history[-1] == Message("assistant", said)  # history keeps the answer trimmed


def test_an_llm_answer_cut_by_its_token_cap_ends_at_its_last_whole_sentence() -> None:
    events, _ = answer_of(RecordingSource("Bring water. Wear good boots and a", 500, simulated=False))
    assert isinstance(events[-1], TurnDone) and events[-1].text == "Bring water. "
    assert [e.text.strip() for e in events if isinstance(e, SegmentReady)] == ["Bring water."]


def test_read_aloud_text_is_spoken_as_given_repeats_and_all() -> None:
    events, _ = answer_of(RecordingSource(LOOPING + " And then", tokens_per_s=500))
    assert isinstance(events[-1], TurnDone) and events[-1].text == LOOPING + " And then"
