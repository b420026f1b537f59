"""Pronunciation markup with the real model: a word's own phonemes change what the engine says, a pause
is heard as silence of its length between the words, and no tag is ever heard (the offline ASR)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from koe.pipeline.speech import Speech
from koe.types import SAMPLE_RATE, Audio
from support import Transcriber, words

#: Below this a 5 ms window counts as silence (Kokoro's pads sit at -80 dBFS and lower).
SILENCE_DB = -60.0
WINDOW_SAMPLES = SAMPLE_RATE // 200
#: How close the silence between the words must be to the pause asked for.
PAUSE_TOLERANCE_S = 0.020


def _inner_silences_s(audio: Audio) -> list[float]:
    """Runs of silent 5 ms windows between sounds, in seconds, in order (leading and trailing left out)."""
    windows = audio[: audio.size // WINDOW_SAMPLES * WINDOW_SAMPLES].reshape(-1, WINDOW_SAMPLES)
    level = 20 * np.log10(np.sqrt((windows.astype(np.float64) ** 2).mean(axis=1)) + 1e-12)
    runs = [(silent, len(list(run))) for silent, run in itertools.groupby(level < SILENCE_DB)]
    return [count * WINDOW_SAMPLES / SAMPLE_RATE for silent, count in runs[1:-1] if silent]


def test_a_word_s_own_phonemes_change_what_the_engine_says(speech: Speech) -> None:
    (marked,) = speech.phonemize("Say [tomato](/təmˈɑtO/) please.")
    (plain,) = speech.phonemize("Say tomato please.")
    assert "təmˈɑtO" in marked and "təmˈɑtO" not in plain
    assert marked.replace("təmˈɑtO", "") != plain
    heard = speech.synthesize("Say [tomato](/təmˈɑtO/) please.")
    said = speech.synthesize("Say tomato please.")
    assert heard.size != said.size or not np.allclose(heard, said)


@pytest.mark.parametrize(
    ("text", "pause_s"),
    [("I said yes [pause:500ms] and then no.", 0.5),
     ('<speak>I said yes <break time="500ms"/> and then no.</speak>', 0.5),
     ("I said yes [pause:200ms] and then no.", 0.2),
     ("Wait. [pause:2s] Then go.", 2.0)],
)  # fmt: skip
def test_a_pause_is_its_length_of_silence_between_the_words(
    speech: Speech, text: str, pause_s: float
) -> None:
    longest = max(_inner_silences_s(speech.synthesize(text)))
    assert abs(longest - pause_s) <= PAUSE_TOLERANCE_S, longest


def test_the_silence_measure_sees_a_pause_that_is_missing(speech: Speech) -> None:
    """Control: without the pause no silence between those words comes near half a second."""
    assert max(_inner_silences_s(speech.synthesize("I said yes and then no."))) < 0.5 - PAUSE_TOLERANCE_S


@pytest.mark.asr
@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "heard"),
    [('<speak>Hello there. <break time="900ms"/> Welcome back.</speak>', "hello there welcome back"),
     ("Wait. [pause:1s] Then, [tomato](/təmˈAtO/) soup.", "wait then tomato soup"),
     ('<speak>Visit the <sub alias="World Wide Web">WWW</sub> today.</speak>',
      "visit the world wide web today"),
     ('<speak>Please say <phoneme alphabet="ipa" ph="ˈhɛloʊ">hello</phoneme> again.</speak>',
      "please say hello again"),
     ('<speak>Call <say-as interpret-as="characters">IBM</say-as> today.</speak>', "call ibm today")],
)  # fmt: skip
def test_no_tag_is_heard_and_what_the_markup_says_is(
    speech: Speech, transcribe: Transcriber, text: str, heard: str
) -> None:
    transcript = words(transcribe(speech.synthesize(text)))
    assert not {"speak", "break", "phoneme", "pause", "sub", "alias", "time"} & set(transcript)
    assert transcript == heard.split()


def test_a_prosody_rate_is_heard_as_the_voice_s_speed(speech: Speech) -> None:
    """Kokoro's durations scale with 1 / speed: ``x-slow`` (0.6) makes the words ~1.7 times as long."""
    plain = speech.synthesize("Please call Stella.")
    slow = speech.synthesize('<speak><prosody rate="x-slow">Please call Stella.</prosody></speak>')
    assert 1.45 < slow.size / plain.size < 1.9
