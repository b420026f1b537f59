"""A number thousands of digits long costs a turn what any text of its length costs: no segment grows past
the segmenter's limit, G2P reads a chunk at a time and stops between chunks once cancelled, and a cancelled
turn frees its worker within a second in every language (the real G2P and model)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from koe.engine.timing import WordSpan
from koe.g2p.base import G2P
from koe.g2p.chunk import G2P_CHUNK_CHARS
from koe.g2p.registry import G2PRegistry
from koe.languages import CODES
from koe.pipeline.listener import Listener
from koe.pipeline.speech import Speech
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.text.languages.lookup import rules_for
from koe.text.segment import SegmenterOptions
from koe.types import SAMPLE_RATE
from long_numbers import FREED_WITHIN_S, LONG_NUMBER, voice_of
from support.fake import FakeEngine, FakeG2P, fake_voices
from support.streaming import every_part

#: Mandarin's digits and 点 are a syllable each; no syllable is said in less than this.
SHORTEST_SYLLABLE_S = 0.1
_WAIT_S = 60.0


class Quiet:
    """The speaker's observer, told nothing worth keeping here."""

    def synthesized(self, took_s: float, audio_s: float) -> None:
        """Not measured here."""

    def first_audio(self, transport: str, latency_s: float) -> None:
        """Not measured here."""


class CountingG2P(FakeG2P):
    """Counts its calls, and sets ``cancel`` after the ``cancel_after``-th."""

    def __init__(self, lang: str, cancel: threading.Event | None = None, cancel_after: int = 0) -> None:
        super().__init__(lang)
        self.calls: list[str] = []
        self._cancel = cancel
        self._cancel_after = cancel_after

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        self.calls.append(text)
        if self._cancel is not None and len(self.calls) == self._cancel_after:
            self._cancel.set()
        return super().phonemize_words(text)


class TimedG2P:
    """A real G2P, with the longest of its calls timed."""

    def __init__(self, g2p: G2P) -> None:
        self.lang = g2p.lang
        self._g2p = g2p
        self.longest_s = 0.0

    def phonemize(self, text: str) -> str:
        return self.phonemize_words(text)[0]

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        started = time.perf_counter()
        try:
            return self._g2p.phonemize_words(text)
        finally:
            self.longest_s = max(self.longest_s, time.perf_counter() - started)


@pytest.fixture(scope="module")
def registry() -> G2PRegistry:
    """The real G2P of every language."""
    return G2PRegistry()


def _fake_speech(g2p: FakeG2P) -> Speech:
    return Speech(FakeEngine(), fake_voices(), {"en-us": g2p})


def test_a_long_text_is_read_a_chunk_at_a_time_with_each_word_where_it_was_written() -> None:
    g2p = CountingG2P("en-us")
    text = "Alpha beta, theta delta. " * 60
    pieces = _fake_speech(g2p).phonemize_words(text)
    assert len(g2p.calls) > 1 and all(len(call) <= G2P_CHUNK_CHARS for call in g2p.calls)
    assert "".join(g2p.calls) == text
    words = [(piece.phonemes, word) for piece in pieces for word in piece.words]
    assert [text[w.text_start : w.text_end] for _, w in words] == [word.strip(",.") for word in text.split()]
    assert all(
        ph[w.phoneme_start : w.phoneme_end] == text[w.text_start : w.text_end].lower() for ph, w in words
    )


def test_once_cancelled_no_further_chunk_is_read() -> None:
    cancel = threading.Event()
    g2p = CountingG2P("en-us", cancel, cancel_after=2)
    text = "Words without end, " * 200
    assert _fake_speech(g2p).phonemize_words(text, cancel=cancel) == []
    assert len(g2p.calls) == 2


def test_a_cancelled_segment_is_not_read_at_all() -> None:
    cancel = threading.Event()
    cancel.set()
    g2p = CountingG2P("en-us")
    speech = _fake_speech(g2p)
    decode = speech.decode("Nobody hears this.", speech.voice("af_heart"), cancel=cancel)
    assert decode.open() == [] and decode.next_audio().size == 0
    assert g2p.calls == []


def test_a_short_first_segment_is_not_joined_past_the_segment_limit_by_a_number_without_pauses() -> None:
    """Joined until it ends at a pause, "Total" would take in all 4,400 digits as one segment."""
    speech = Speech(FakeEngine(), fake_voices(), {"en-us": FakeG2P("en-us")})
    synthesizer = Synthesizer(speech, Scheduler(1, 64), SegmentCost(), Quiet(), windowed_first=True)

    async def main() -> list[str]:
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        stream.add(LONG_NUMBER)
        stream.finish()
        try:
            parts = await every_part(stream, _WAIT_S)
        finally:
            await synthesizer.scheduler.aclose(5.0)
        return [part.segment.text for part in parts if part.first]

    texts = asyncio.run(main())
    assert max(len(text) for text in texts) <= SegmenterOptions().max_chars
    assert " ".join(texts).replace(" ", "") == LONG_NUMBER.replace(" ", "")


@pytest.mark.serial
@pytest.mark.parametrize("lang", CODES)
def test_no_g2p_call_on_a_long_number_takes_longer_than_a_cancel_may_wait(
    registry: G2PRegistry, lang: str
) -> None:
    """The whole reported text at once, the worst a segment could be: each G2P call (a chunk) is short.
    It once went to OpenJTalk whole, for minutes."""
    timed = TimedG2P(registry.get(lang))
    speech = Speech(FakeEngine(), fake_voices(), {"en-us": registry.get("en-us"), lang: timed})
    started = time.perf_counter()
    pieces = speech.phonemize_words(rules_for(lang).normalize(LONG_NUMBER).spoken, lang)
    print(
        f"{lang}: {time.perf_counter() - started:.2f} s in all, longest call {timed.longest_s * 1000:.0f} ms"
    )
    assert pieces and timed.longest_s < FREED_WITHIN_S


@pytest.mark.serial
@pytest.mark.parametrize("lang", CODES)
def test_a_cancelled_turn_of_a_long_number_frees_its_worker_within_a_second(
    speech: Speech, lang: str
) -> None:
    """The reported case: the turn is left once its first audio came, while its next job runs."""
    scheduler = Scheduler(1, 64)
    synthesizer = Synthesizer(speech, scheduler, SegmentCost(), Quiet(), windowed_first=True)

    async def main() -> float:
        stream = synthesizer.stream(synthesizer.voice(voice_of(lang)), Listener())
        stream.add(LONG_NUMBER)
        stream.finish()
        heard = 0

        async def listen() -> None:
            nonlocal heard
            while await stream.next() is not None:
                heard += 1

        listener = asyncio.create_task(listen())
        try:
            async with asyncio.timeout(_WAIT_S):
                while not heard or not scheduler.stats.running:  # noqa: ASYNC110  # a worker's thread sets it
                    await asyncio.sleep(0.005)
            await asyncio.sleep(0.2)  # well into the running job: G2P or a decoding step
            left = time.perf_counter()
            listener.cancel()
            stream.close()
            async with asyncio.timeout(_WAIT_S):
                while scheduler.stats.running or scheduler.stats.queued:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
            return time.perf_counter() - left
        finally:
            listener.cancel()
            await scheduler.aclose(5.0)

    freed_s = asyncio.run(main())
    print(f"{lang}: worker free {freed_s * 1000:.0f} ms after the cancel")
    assert freed_s < FREED_WITHIN_S


def test_pi_to_twenty_decimals_is_spoken_by_a_mandarin_voice(speech: Speech) -> None:
    """Every digit is said: the phonemes are those of the number written in Chinese digits (cn2an's reading
    stopped at 16 decimals), and the audio holds at least a syllable for each."""
    pi = "3.14159265358979323846"
    assert speech.phonemize(pi, "zh") == speech.phonemize(
        "三点一四一五九二六五三五八九七九三二三八四六", "zh"
    )
    audio = speech.synthesize(pi, voice="zf_xiaobei")
    assert audio.size / SAMPLE_RATE > len(pi) * SHORTEST_SYLLABLE_S  # "." is 点, a syllable too
