"""The segment cache inside a turn's stream: a hit skips G2P, the queue and the engine, and is heard, timed,
admitted and cancelled like synthesized audio; on the fake engine, and bit for bit on the real model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import numpy as np
import pytest

from koe.engine.timing import WordSpan
from koe.errors import OverloadedError
from koe.pipeline.cache import SegmentCache, segment_key
from koe.pipeline.job import Part
from koe.pipeline.listener import Listener
from koe.pipeline.speech import Speech
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from support.fake import FakeEngine, FakeG2P, fake_voices
from support.streaming import every_part, first_part_streamed

OPENER = "Sure, I can help with that."
_WAIT_S = 30.0


class CountingG2P(FakeG2P):
    def __init__(self, lang: str) -> None:
        super().__init__(lang)
        self.calls = 0

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        self.calls += 1
        return super().phonemize_words(text)


class Synthesized:
    """The speaker's observer: what it was told was synthesized."""

    def __init__(self) -> None:
        self.segments = 0

    def synthesized(self, took_s: float, audio_s: float) -> None:
        self.segments += 1

    def first_audio(self, transport: str, latency_s: float) -> None:
        """Not measured here."""


def _synthesizer(
    engine: FakeEngine | None = None, *, megabytes: float = 8, scheduler: Scheduler | None = None
) -> tuple[Synthesizer, CountingG2P]:
    g2p = CountingG2P("en-us")
    speech = Speech(engine or FakeEngine(), fake_voices(), {"en-us": g2p, "en-gb": FakeG2P("en-gb")})
    synthesizer = Synthesizer(
        speech,
        scheduler or Scheduler(2, 64),
        SegmentCost(),
        Synthesized(),
        cache=SegmentCache.of_megabytes(megabytes),
    )
    return synthesizer, g2p


async def _speak(synthesizer: Synthesizer, text: str, *, windowed: bool = False) -> list[Part]:
    stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener(), complete=not windowed)
    stream.add(text)
    stream.finish()
    return await every_part(stream, _WAIT_S)


def _run(synthesizer: Synthesizer, main):  # type: ignore[no-untyped-def]
    async def bounded():  # type: ignore[no-untyped-def]
        try:
            return await main()
        finally:
            await synthesizer.scheduler.aclose(5.0)

    return asyncio.run(bounded())


async def _until(done: Callable[[], bool]) -> None:
    """Wait for a worker thread's effect (the scheduler and the fake engine have no events to await)."""
    async with asyncio.timeout(_WAIT_S):
        while not done():  # noqa: ASYNC110  # the state changes in another thread
            await asyncio.sleep(0.005)


def test_a_segment_said_before_is_replayed_without_g2p_the_queue_or_the_engine() -> None:
    engine = FakeEngine()
    synthesizer, g2p = _synthesizer(engine)

    async def main() -> tuple[list[Part], list[Part], tuple[int, int, int]]:
        first = await _speak(synthesizer, OPENER)
        before = (engine.calls, g2p.calls, synthesizer.scheduler.stats.completed)
        second = await _speak(synthesizer, "**Sure**,  I can help with that.")
        assert (engine.calls, g2p.calls, synthesizer.scheduler.stats.completed) == before
        return first, second, before

    first, second, _ = _run(synthesizer, main)
    assert [p.cached for p in first] == [False] and [p.cached for p in second] == [True]
    assert second[0].audio.tobytes() == first[0].audio.tobytes()
    assert second[0].took_s == 0.0 and second[0].first and second[0].last


def test_a_replayed_segment_s_words_point_at_the_text_of_the_turn_that_replays_it() -> None:
    synthesizer, _ = _synthesizer()
    written = "**Sure**, I can help with that."
    first, second = _run(synthesizer, lambda: _both(synthesizer, OPENER, written))
    assert [(w.start_s, w.end_s) for w in second[0].words] == [(w.start_s, w.end_s) for w in first[0].words]
    assert [w.word for w in second[0].words] == ["Sure", "I", "can", "help", "with", "that"]
    assert all(written[a:b] == w.word for w in second[0].words for a, b in [w.source_span])
    assert second[0].words[0].source_span == (2, 6)


async def _both(synthesizer: Synthesizer, first: str, second: str) -> tuple[list[Part], list[Part]]:
    return await _speak(synthesizer, first), await _speak(synthesizer, second)


def test_only_the_segments_said_before_are_replayed_in_a_longer_turn() -> None:
    engine = FakeEngine()
    synthesizer, _ = _synthesizer(engine)
    answer = OPENER + " The museum opens at nine."
    first, second = _run(synthesizer, lambda: _both(synthesizer, OPENER, answer))
    assert [p.cached for p in second] == [True, False]
    assert second[0].audio.tobytes() == first[0].audio.tobytes()
    assert second[1].segment.spoken_text == "The museum opens at nine."


def test_a_replay_is_not_counted_as_synthesis_nor_fed_to_the_cost_model() -> None:
    synthesizer, _ = _synthesizer()
    observer = synthesizer.observer
    assert isinstance(observer, Synthesized)

    async def main() -> tuple[float, float]:
        speaker = synthesizer.speaker(synthesizer.stream(synthesizer.voice("af_heart"), Listener()), "ws")
        await _hear(speaker, OPENER)
        scale = synthesizer.cost.synthesis.scale
        speaker = synthesizer.speaker(synthesizer.stream(synthesizer.voice("af_heart"), Listener()), "ws")
        await _hear(speaker, OPENER)
        assert speaker.tally.segments == 1 and speaker.tally.synthesis_s == 0.0
        return scale, synthesizer.cost.synthesis.scale

    scale_before, scale_after = _run(synthesizer, main)
    assert observer.segments == 1
    assert scale_after == scale_before


async def _hear(speaker, text: str) -> None:  # type: ignore[no-untyped-def]
    speaker.stream.add(text)
    speaker.stream.finish()
    async with asyncio.timeout(_WAIT_S):
        async for _event in speaker.events():
            pass
    speaker.stream.close()


def test_a_cancelled_segment_is_never_stored() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)
    synthesizer, _ = _synthesizer(engine)

    async def main() -> int:
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        stream.add(OPENER)
        stream.finish()
        stream.start()
        await _until(lambda: engine.calls >= 1)
        stream.close()  # barge-in while the segment is being synthesized
        gate.set()
        await _until(lambda: synthesizer.scheduler.stats.running == 0)
        assert synthesizer.cache.stats.entries == 0
        calls = engine.calls
        parts = await _speak(synthesizer, OPENER)
        assert not parts[0].cached
        return engine.calls - calls

    assert _run(synthesizer, main) > 0  # synthesized again: nothing truncated was kept


def test_cancelling_a_turn_drops_its_replayed_segment_and_leaves_the_cache_intact() -> None:
    synthesizer, _ = _synthesizer()

    async def main() -> tuple[list[Part], list[Part]]:
        first = await _speak(synthesizer, OPENER)
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        stream.add(OPENER + " And more text follows here.")
        stream.finish()
        stream.start()  # the opener is ready at once, the rest is queued
        stream.close()
        assert synthesizer.cache.stats.hits == 1
        return first, await _speak(synthesizer, OPENER)

    first, again = _run(synthesizer, main)
    assert again[0].cached and again[0].audio.tobytes() == first[0].audio.tobytes()


def test_a_turn_opening_with_a_cached_segment_passes_admission_like_any_other() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate)
    synthesizer, _ = _synthesizer(engine, scheduler=Scheduler(1, 1))
    voice = synthesizer.voice("af_heart")
    audio = np.ones(2_400, dtype=np.float32)
    synthesizer.cache.put(segment_key(synthesizer.speech.identity, voice, OPENER), audio, ())

    async def main() -> None:
        busy = [synthesizer.stream(voice, Listener()) for _ in range(2)]
        for stream, text in zip(busy, ("Running now.", "Waiting in the queue."), strict=True):
            stream.add(text)
            stream.finish()
            stream.start()
        await _until(lambda: synthesizer.scheduler.stats.queued == 1)
        refused = synthesizer.stream(voice, Listener())
        refused.add(OPENER)
        refused.finish()
        with pytest.raises(OverloadedError):
            refused.start()
        for stream in busy:
            stream.close()
        gate.set()
        await _until(lambda: synthesizer.scheduler.stats.queued == 0)
        parts = await _speak(synthesizer, OPENER)  # with room in the queue, the same turn is heard
        assert parts[0].cached and np.array_equal(parts[0].audio, audio)

    _run(synthesizer, main)


#: One segment long enough (over 80 frames) to be decoded in windows.
LONG = "Please call Stella and ask her to bring these things with her from the store."


def _windowed_synthesizer(engine: FakeEngine) -> Synthesizer:
    synthesizer, _ = _synthesizer(engine)
    return Synthesizer(
        synthesizer.speech, synthesizer.scheduler, synthesizer.cost, synthesizer.observer,
        windowed=True, cache=synthesizer.cache,
    )  # fmt: skip


def test_a_windowed_segment_is_stored_as_its_parts_were_sent_and_replayed_without_the_engine() -> None:
    engine = FakeEngine()
    synthesizer = _windowed_synthesizer(engine)

    async def main() -> tuple[list[Part], list[Part], list[Part]]:
        windowed = await _speak(synthesizer, LONG, windowed=True)
        calls = engine.calls
        replayed = await _speak(synthesizer, LONG, windowed=True)
        whole = await _speak(synthesizer, LONG)  # a complete body: whole decodes replay it too
        assert engine.calls == calls
        return windowed, replayed, whole

    windowed, replayed, whole = _run(synthesizer, main)
    assert len(windowed) > 1 and not any(p.cached for p in windowed)
    assert [p.cached for p in replayed] == [p.cached for p in whole] == [True]
    sent = np.concatenate([p.audio for p in windowed])
    assert replayed[0].audio.tobytes() == sent.tobytes() == whole[0].audio.tobytes()
    assert replayed[0].words == windowed[0].words


def test_a_windowed_segment_cancelled_between_its_windows_is_never_stored() -> None:
    gate = threading.Event()
    engine = FakeEngine(gate=gate, gate_after=2)  # two windows decode, the third is held
    synthesizer = _windowed_synthesizer(engine)

    async def main() -> tuple[int, list[Part]]:
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        stream.add(LONG)
        stream.finish()
        heard = [await stream.next(), await stream.next()]
        assert all(p is not None and not p.last for p in heard)
        await _until(lambda: engine.calls >= 3)
        stream.close()  # barge-in with the segment half sent
        gate.set()
        await _until(lambda: synthesizer.scheduler.stats.running == 0)
        entries = synthesizer.cache.stats.entries
        return entries, await _speak(synthesizer, LONG, windowed=True)

    entries, again = _run(synthesizer, main)
    assert entries == 0
    assert not any(p.cached for p in again) and len(again) > 1  # synthesized again, whole this time


#: An agent's opener whose first sentence is long: streamed, it is still arriving when the first segment is
#: cut (the same text as the first-speech measurement in docs/engine.md).
STREAMED = "Sure, I can help you reset your password and get back into your account in minutes. Then more."


def test_a_streamed_first_segment_is_cut_before_its_sentence_has_arrived() -> None:
    synthesizer, _ = _synthesizer()
    synthesizer = Synthesizer(
        synthesizer.speech, synthesizer.scheduler, synthesizer.cost, synthesizer.observer,
        windowed_first=True, cache=synthesizer.cache,
    )  # fmt: skip
    arrived = STREAMED[: STREAMED.index(" your account")]  # the sentence is far from its end

    async def main() -> Part | None:
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        return await first_part_streamed(stream, arrived)

    first = _run(synthesizer, main)
    assert first is not None and first.segment.text == "Sure, I can help you reset your password"


def test_a_first_segment_sent_whole_is_windowed_to_its_sentence_end_not_cut_by_the_hint() -> None:
    synthesizer = _windowed_synthesizer(FakeEngine())
    parts = _run(synthesizer, lambda: _speak(synthesizer, STREAMED, windowed=True))
    assert parts[0].segment.text == STREAMED[: STREAMED.index(" Then")]


def test_a_replayed_segment_is_bit_identical_to_a_fresh_synthesis_on_the_real_model(speech: Speech) -> None:
    synthesizer = Synthesizer(
        speech, Scheduler(1, 8), SegmentCost(), Synthesized(), cache=SegmentCache.of_megabytes(8)
    )
    first, second = _run(synthesizer, lambda: _both(synthesizer, OPENER, OPENER))
    fresh = speech.synthesize(OPENER)
    assert [p.cached for p in first + second] == [False, True]
    assert second[0].audio.dtype == np.float32 and second[0].audio.tobytes() == first[0].audio.tobytes()
    assert second[0].audio.tobytes() == fresh.tobytes()
    assert second[0].words == first[0].words and len(first[0].words) == 6
