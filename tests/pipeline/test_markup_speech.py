"""Pronunciation markup through G2P and the engine, on the fake engine: a word's own phonemes reach the
engine instead of G2P's, a pause is silence of its length with no engine call, word timings point at the
written word, and the segment cache tells two spellings apart."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from koe.errors import ConfigError
from koe.pipeline.cache import segment_key
from koe.pipeline.job import SegmentJob
from koe.text.segment import Segment, Segmenter
from koe.types import SAMPLE_RATE, Audio
from support.fake import FakeEngine, fake_speech

#: A word's time apart in the fake engine's audio is exact to the sample; a millisecond covers rounding.
TOLERANCE_S = 0.001


def _segments(text: str) -> list[Segment]:
    segmenter = Segmenter()
    return [*segmenter.feed(text), *segmenter.flush()]


def _longest_silence_s(audio: Audio) -> float:
    """The longest run of exact zeros (the fake engine's pads and koe's pauses; its tones are never 0 for
    more than a sample)."""
    zero = np.concatenate(([False], audio == 0, [False]))
    edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
    runs = edges[1::2] - edges[::2]
    return float(runs.max()) / SAMPLE_RATE if runs.size else 0.0


def test_a_word_s_own_phonemes_reach_the_engine_instead_of_g2p() -> None:
    engine = FakeEngine()
    speech = fake_speech(engine)
    marked = speech.synthesize("Say [tomato](/təmˈɑtO/) now.")
    assert engine.worked == ["say təmˈɑtO now."]
    plain = speech.synthesize("Say tomato now.")
    assert engine.worked[-1] == "say tomato now."
    assert marked.size != plain.size or not np.array_equal(marked, plain)


def test_the_word_s_timing_points_at_the_written_word() -> None:
    speech = fake_speech()
    text = "Say [New York](/nˈu jˈɔɹk/) now."
    (segment,) = _segments(text)
    part = SegmentJob(speech, segment, speech.voice("af_heart"), threading.Event()).step()
    assert [w.word for w in part.words] == ["Say", "New York", "now"]
    start, end = part.words[1].source_span
    assert text[start:end] == "New York" and text[start - 1] == "["


@pytest.mark.parametrize("pause", ["[pause:500ms]", "[pause:0.5s]"])
def test_a_pause_puts_its_length_between_the_words(pause: str) -> None:
    engine = FakeEngine()
    speech = fake_speech(engine)
    (segment,) = _segments(f"Hello {pause} there friend")
    part = SegmentJob(speech, segment, speech.voice("af_heart"), threading.Event()).step()
    hello, there, _ = part.words
    assert abs((there.start_s - hello.end_s) - 0.5) <= TOLERANCE_S
    assert abs(_longest_silence_s(part.audio) - 0.5) <= TOLERANCE_S
    assert engine.worked == ["hello", "there friend"]  # the pause is no engine call


def test_a_pause_alone_is_silence_without_an_engine_call() -> None:
    engine = FakeEngine()
    audio = fake_speech(engine).synthesize("[pause:2s]")
    assert engine.calls == 0
    assert audio.size > SAMPLE_RATE and not audio.any()


def test_a_shared_engine_call_gives_the_audio_and_words_of_the_stepped_decode() -> None:
    engine = FakeEngine()
    speech = fake_speech(engine)
    voice = speech.voice("af_heart")
    spoken = "Hello [pause:300ms] there [tomato](/təmˈɑtO/) [pause:1s] friend"
    stepped = speech.decode(spoken, voice)
    words = stepped.open()
    audio = stepped.next_audio()
    shared = speech.decode(spoken, voice)
    requests = shared.requests()
    assert [r.phonemes for r in requests] == ["hello", "there təmˈɑtO", "friend"]
    shared_words, shared_audio = shared.complete(engine.synthesize_batch(requests))
    assert shared_words == words
    assert np.array_equal(shared_audio, audio)


@pytest.mark.parametrize(
    ("text", "named"), [("Say [tomato](/təm☃tO/).", "☃"), ("Say [tomato](/tomato1/).", "1")]
)
def test_a_symbol_outside_kokoro_s_alphabet_is_invalid_markup_naming_it(text: str, named: str) -> None:
    with pytest.raises(ConfigError) as error:
        fake_speech().synthesize(text)
    assert error.value.code == "invalid_markup"
    assert repr(named) in error.value.message


def test_the_segment_cache_tells_two_spellings_apart() -> None:
    speech = fake_speech()
    voice = speech.voice("af_heart")
    (one,) = _segments("Say [tomato](/təmˈɑtO/).")
    (other,) = _segments("Say [tomato](/təmˈAtO/).")
    assert segment_key("id", voice, one.spoken_text) != segment_key("id", voice, other.spoken_text)
