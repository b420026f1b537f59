"""How long a streamed turn's later segments are cut: their predicted synthesis fits a share of the audio the
listener has before it (:data:`~koe.pipeline.stream.HINT_BUDGET_SHARE`), the rest kept as margin for what the
cost model cannot see, and the prediction follows an engine that slows down mid-turn. On the fake engine,
with a cost model whose numbers the test sets and a listener whose clock stands still, so the budget is
exactly the audio handed over."""

from __future__ import annotations

import asyncio
import math
from typing import NamedTuple

from koe.pipeline.job import Part
from koe.pipeline.listener import Listener
from koe.pipeline.speech import Speech
from koe.pipeline.stream import HINT_BUDGET_SHARE, SegmentStream
from koe.scheduler.cost import SEGMENT_LEARNING_RATE, SEGMENT_SLOWDOWN_RATE, LinearCost, SegmentCost
from koe.scheduler.queue import Scheduler
from koe.text.languages.lookup import segmenter_for
from koe.types import SAMPLE_RATE
from support.fake import FakeEngine, fake_seconds, fake_speech
from support.streaming import WAIT_S

#: A short first sentence (the first segment), then one long sentence with no pause to cut at: a later
#: segment of it ends where the hint's limit falls, at a word.
OPENER = "Sure, here it is."
LONG = (
    "Please call Stella and ask her to bring these things with her from the store because we will need "
    "them for the party on Saturday night and for the picnic by the lake on Sunday afternoon."
)


class _FixedCost(SegmentCost):
    """The test's numbers throughout: the segments decoded do not correct them."""

    def observe(self, chars: int, audio_s: float, took_s: float) -> None:
        """Not learned from."""


class _Cut(NamedTuple):
    """The first segment's part; the listener's budget and the cost model's scale and speech rate once it is
    handed over (what the second segment is cut with); the second segment's first part."""

    first: Part
    budget_s: float
    scale: float
    chars_per_s: float
    second: Part


def _two_parts(cost: SegmentCost, listener: Listener, speech: Speech | None = None) -> _Cut:
    """The first two segments of ``OPENER LONG`` streamed (unfinished) to ``listener``."""
    speech = speech or fake_speech()
    voice = speech.voice("af_heart")
    scheduler = Scheduler(1, 64)
    stream = SegmentStream(speech, scheduler, cost, voice, listener, segmenter_for(voice.lang), lookahead=1)

    async def main() -> tuple[Part | None, float, float, float, Part | None]:
        stream.add(f"{OPENER} {LONG}")
        try:
            async with asyncio.timeout(WAIT_S):
                first = await stream.next()
                # the second segment is cut on the next call, before it is observed
                seen = listener.budget_s(), cost.synthesis.scale, cost.chars_per_s
                return first, *seen, await stream.next()
        finally:
            stream.close()
            await scheduler.aclose(5.0)

    first, budget_s, scale, chars_per_s, second = asyncio.run(main())
    assert first is not None and second is not None
    return _Cut(first, budget_s, scale, chars_per_s, second)


def test_a_later_segment_is_cut_to_what_synthesizes_within_a_share_of_the_listeners_budget() -> None:
    """Synthesis takes a tenth of the audio's time, with no overhead: the first segment's audio, all still
    ahead of the listener, would let the second segment run to more words than its share does, and the
    second segment ends at the last word within the share."""
    cost = _FixedCost(LinearCost(0.0, 0.1), chars_per_s=14.0)
    first, budget_s, _, _, second = _two_parts(cost, Listener(now=lambda: 0.0))
    assert first.segment.text == OPENER and first.last
    assert budget_s == first.audio.size / SAMPLE_RATE  # the clock stands still: every sample is still ahead
    limit = cost.chars_within(HINT_BUDGET_SHARE * budget_s)
    assert second.segment.text == LONG[: len(second.segment.text)]
    next_word = LONG[len(second.segment.text) :].split()[0]
    assert len(second.segment.text) <= limit < len(second.segment.text) + 1 + len(next_word)  # to the word
    # the whole budget would have let the next word in: the share is what cut it
    assert len(second.segment.text) + 1 + len(next_word) <= cost.chars_within(budget_s)


def test_an_engine_slowing_down_mid_turn_cuts_the_next_segment_to_the_slower_engine() -> None:
    """The engine turns three times slower than predicted on the turn's first segment (a neighbour took a
    core): most of the slowdown is believed at once (:data:`SEGMENT_SLOWDOWN_RATE`), so the second segment is
    cut to what the slower engine makes within the share. The control: a plain average
    (:data:`SEGMENT_LEARNING_RATE`) would still believe the engine nearly as fast as before, and would have
    let more words in."""
    slow = 3.0
    synthesis = LinearCost(
        0.0, 0.05, learning_rate=SEGMENT_LEARNING_RATE, slowdown_rate=SEGMENT_SLOWDOWN_RATE
    )
    cost = SegmentCost(synthesis, chars_per_s=14.0)
    engine = FakeEngine(delay_s=slow * cost.synthesis_s(fake_seconds(OPENER)))
    cut = _two_parts(cost, Listener(now=lambda: 0.0), fake_speech(engine))
    assert cut.first.segment.text == OPENER
    assert cut.scale >= 1 + SEGMENT_SLOWDOWN_RATE * (slow - 1)  # the first segment took at least 3x
    share_s = HINT_BUDGET_SHARE * cut.budget_s
    text = cut.second.segment.text
    assert text == LONG[: len(text)]
    assert len(text) <= math.floor(share_s / (cut.scale * 0.05) * cut.chars_per_s)  # the slower engine's
    ratio = 1 + (cut.scale - 1) / SEGMENT_SLOWDOWN_RATE  # what the first segment measured
    averaged = 1 + SEGMENT_LEARNING_RATE * (ratio - 1)
    next_word = LONG[len(text) :].split()[0]
    assert len(text) + 1 + len(next_word) <= math.floor(share_s / (averaged * 0.05) * cut.chars_per_s)
