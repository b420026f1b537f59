"""A streamed turn's first segment, as an agent's answer (or Home Assistant's, over Wyoming) opens it: a short
first sentence is all the stream holds when it is cut, and it is still decoded in windows, so its first
audio waits for stage A and one window, not for the whole segment. On the fake engine, which windows by
the ONNX engine's rule (:data:`~koe.engine.onnx.windowing.MIN_WINDOWED_FRAMES`)."""

from __future__ import annotations

import asyncio

from koe.engine.onnx.windowing import MIN_WINDOWED_FRAMES
from koe.engine.timing import FRAME_SAMPLES
from koe.pipeline.job import Part
from koe.pipeline.listener import Listener
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.types import SAMPLE_RATE
from support.fake import fake_seconds, fake_speech
from support.streaming import first_part_streamed

#: Six words, ~2.1 s on the fake engine: the length of a voice agent's typical first sentence.
FIRST = "Sure, here is the way to the old station."
#: What has arrived when the first segment is cut: the next sentence has only begun.
ARRIVED = FIRST + " Take the"


class _Unobserved:
    def synthesized(self, took_s: float, audio_s: float) -> None:
        """Not measured here."""

    def first_audio(self, transport: str, latency_s: float) -> None:
        """Not measured here."""


def _first_part(text: str) -> Part:
    """The first part a windowed-first stream hands out for ``text`` streamed a word at a time, unfinished."""
    synthesizer = Synthesizer(
        fake_speech(), Scheduler(2, 64), SegmentCost(), _Unobserved(), windowed_first=True
    )

    async def main() -> Part | None:
        try:
            return await first_part_streamed(
                synthesizer.stream(synthesizer.voice("af_heart"), Listener()), text
            )
        finally:
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
