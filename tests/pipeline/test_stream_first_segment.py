"""A streamed turn's first segment, as an agent's answer (or Home Assistant's, over Wyoming) opens it: a short
first sentence is all the stream holds when it is cut, and it is still decoded in windows, so its first
audio waits for stage A and one window, not for the whole segment — while the engine is the turn's alone;
with another turn's job on it, the first segment decodes whole. On the fake engine, which windows by the
ONNX engine's rule (:data:`~koe.engine.onnx.windowing.MIN_WINDOWED_FRAMES`)."""

from __future__ import annotations

import asyncio
import threading
import time

from koe.engine.onnx.windowing import MIN_WINDOWED_FRAMES
from koe.engine.timing import FRAME_SAMPLES
from koe.pipeline.job import Part
from koe.pipeline.listener import Listener
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.types import SAMPLE_RATE
from support.fake import fake_seconds, fake_speech
from support.streaming import WAIT_S, first_part_streamed

#: Six words, ~2.1 s on the fake engine: the length of a voice agent's typical first sentence.
FIRST = "Sure, here is the way to the old station."
#: What has arrived when the first segment is cut: the next sentence has only begun.
ARRIVED = FIRST + " Take the"


class _Unobserved:
    def synthesized(self, took_s: float, audio_s: float) -> None:
        """Not measured here."""

    def first_audio(self, transport: str, latency_s: float) -> None:
        """Not measured here."""


def _first_part(text: str, *, other_turn_at_work: bool = False) -> Part:
    """The first part a windowed-first stream hands out for ``text`` streamed a word at a time, unfinished;
    ``other_turn_at_work``: while another turn's job runs on one of the scheduler's two workers."""
    synthesizer = Synthesizer(
        fake_speech(), Scheduler(2, 64), SegmentCost(), _Unobserved(), windowed_first=True
    )

    async def main() -> Part | None:
        other = threading.Event()
        running = None
        if other_turn_at_work:  # a worker is free at once, so the job runs from here until it is released
            running = synthesizer.scheduler.submit(
                lambda: other.wait(WAIT_S), deadline=time.monotonic(), cost_s=0.0
            )
            assert synthesizer.scheduler.stats.running == 1
        try:
            return await first_part_streamed(
                synthesizer.stream(synthesizer.voice("af_heart"), Listener()), text
            )
        finally:
            other.set()
            if running is not None:
                await running
            await synthesizer.scheduler.aclose(5.0)

    part = asyncio.run(main())
    assert part is not None
    return part


def test_a_streamed_two_second_first_sentence_is_decoded_in_windows_though_nothing_follows_it_yet() -> None:
    assert 2.0 <= fake_seconds(FIRST) < 2.5  # two seconds: six words, as spoken
    first = _first_part(ARRIVED)
    assert first.segment.text == FIRST  # the next sentence was not there to be joined
    assert not first.last  # windowed: its first audio came before the rest of the segment was decoded


def test_a_first_segment_too_short_to_window_still_decodes_whole() -> None:
    short = "Sure, here it is."
    assert fake_seconds(short) < MIN_WINDOWED_FRAMES * FRAME_SAMPLES / SAMPLE_RATE
    first = _first_part(short + " Take the")
    assert first.segment.text == short and first.last  # one part: the control for the test above


def test_a_first_sentence_that_would_window_decodes_whole_while_another_turns_job_runs() -> None:
    """Windows cost more work than a whole decode, and on a shared engine that work slows the other turn
    too: the first segment then decodes whole (its one part is its last)."""
    first = _first_part(ARRIVED, other_turn_at_work=True)
    assert first.segment.text == FIRST and first.last  # alone, it is windowed (the first test)


#: A first sentence too short to window, and the whole sentence after it already arrived.
SHORT_THEN_NEXT = ("Sure, here it is.", "Take the Red Line to the old station.")


def test_a_short_first_sentence_is_joined_to_window_only_while_the_engine_is_the_turns_alone() -> None:
    """Alone, the short first sentence is joined with the next (too short to window, it would decode
    whole); with another turn's job on the engine it is not decoded in windows, so nothing is joined."""
    short, following = SHORT_THEN_NEXT
    assert fake_seconds(short) < MIN_WINDOWED_FRAMES * FRAME_SAMPLES / SAMPLE_RATE
    text = f"{short} {following} Then walk"
    alone = _first_part(text)
    assert alone.segment.text == f"{short} {following}" and not alone.last
    shared = _first_part(text, other_turn_at_work=True)
    assert shared.segment.text == short and shared.last
