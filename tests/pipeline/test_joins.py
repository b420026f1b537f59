"""Segments joined by the pipeline pause as Kokoro does inside one utterance (the real model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from koe.engine.base import SynthesisRequest
from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.pipeline.seams import trim
from koe.pipeline.speech import Speech
from koe.text.segment import Segmenter
from koe.types import Audio
from support import Transcriber, words

TEXT = "The ride takes about half an hour. Get off at Harbor Street and walk east."
#: Below this a frame counts as silence (Kokoro's pads sit at -80 dBFS and lower).
SILENCE_DB = -60.0


def _silences_ms(audio: Audio) -> list[int]:
    """Runs of silent frames, in milliseconds, in order (the leading silence first)."""
    frames = audio[: audio.size // FRAME_SAMPLES * FRAME_SAMPLES].reshape(-1, FRAME_SAMPLES)
    quiet = 20 * np.log10(np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1)) + 1e-12) < SILENCE_DB
    return [25 * len(list(run)) for silent, run in itertools.groupby(quiet) if silent]


@pytest.fixture(scope="module")
def whole(speech: Speech) -> Audio:
    """The text decoded in one utterance, as Kokoro speaks it (both tests compare with it; a decode costs
    seconds)."""
    (phonemes,) = speech.phonemize(TEXT)
    return speech.engine.synthesize(SynthesisRequest(phonemes, speech.voices.resolve("af_heart")))


def test_segments_join_with_the_pauses_of_whole_text_synthesis(
    speech: Speech, transcribe: Transcriber, whole: Audio
) -> None:
    segmenter = Segmenter()
    segments = [*segmenter.feed(TEXT), *segmenter.flush()]
    assert len(segments) == 2  # one join to listen to
    voice = speech.voice("af_heart")
    parts = []
    for segment in segments:  # as a stream speaks them: one utterance each
        decode = speech.decode(segment.spoken_text, voice)
        decode.open()
        parts.append(decode.next_audio())
    joined = np.concatenate(parts)
    joined_pauses, whole_pauses = _silences_ms(joined), _silences_ms(whole)
    assert max(joined_pauses) <= max(whole_pauses) + 100  # no join pauses longer than whole text's
    assert joined_pauses[0] < whole_pauses[0]  # and the leading silence before the first word is cut
    assert 0.9 * whole.size <= joined.size <= 1.05 * whole.size
    assert words(transcribe(joined)) == words(TEXT)


def test_whole_text_synthesis_speaks_consecutive_sentences_as_one_utterance(
    speech: Speech, transcribe: Transcriber, whole: Audio
) -> None:
    style = speech.voices.resolve("af_heart")
    (phonemes,) = speech.phonemize(TEXT)
    timing = next(speech.engine.stream(SynthesisRequest(phonemes, style)))
    assert isinstance(timing, SegmentTiming)
    kept = trim(timing)
    said = speech.synthesize(TEXT, voice="af_heart")
    assert np.array_equal(said, kept.apply(whole, 0))
    assert words(transcribe(said)) == words(TEXT)
