"""The loaded engine speaks real, intelligible English (checked by an offline ASR model)."""

from __future__ import annotations

import numpy as np
import pytest

from koe.engine.vocab import MAX_PHONEME_TOKENS, count_tokens
from koe.errors import ConfigError, VoiceError
from koe.pipeline.speech import Speech
from support import Transcriber, words

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("voice", "sentence"),
    [
        ("af_heart", "Please call Stella and ask her to bring these things."),
        ("am_michael", "The quick brown fox jumps over the lazy dog."),
        ("bf_emma", "We will meet at the station tomorrow morning."),
        ("bm_george", "Please call Stella and ask her to bring these things."),
    ],
)
def test_speech_is_transcribed_back_to_the_same_words(
    speech: Speech, transcribe: Transcriber, voice: str, sentence: str
) -> None:
    audio = speech.synthesize(sentence, voice=voice)
    assert audio.dtype == np.float32 and np.abs(audio).max() > 0.05
    assert words(transcribe(audio)) == words(sentence)


def test_text_over_the_token_window_is_spoken_completely(speech: Speech, transcribe: Transcriber) -> None:
    sentence = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november. "
    text = sentence * 5 + "The final words are zebra crossing."  # just over the window: tokens cost decoding
    pieces = speech.phonemize(text)
    assert len(pieces) >= 2 and sum(count_tokens(p) for p in pieces) > MAX_PHONEME_TOKENS
    audio = speech.synthesize(text)
    tail = audio[-4 * speech.sample_rate :]
    assert {"zebra", "crossing"} <= set(words(transcribe(tail)))


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text_gives_empty_audio(speech: Speech, text: str) -> None:
    assert speech.synthesize(text).size == 0


def test_faster_speed_gives_shorter_audio(speech: Speech) -> None:
    slow = speech.synthesize("One two three four.", speed=0.8)
    fast = speech.synthesize("One two three four.", speed=1.3)
    assert len(fast) < 0.8 * len(slow)


@pytest.mark.parametrize("speed", [0, -1, 0.1, 5, float("nan"), float("inf"), "fast", True])
def test_invalid_speed_is_refused(speech: Speech, speed: object) -> None:
    with pytest.raises(ConfigError, match="speed"):
        speech.synthesize("Hi.", speed=speed)  # type: ignore[arg-type]


def test_unknown_voice_is_refused_before_synthesis(speech: Speech) -> None:
    with pytest.raises(VoiceError, match="valid voices"):
        speech.synthesize("Hi.", voice="zz_nobody")


def test_synthesis_is_deterministic(speech: Speech) -> None:
    first = speech.synthesize("Same words twice.")
    assert np.array_equal(first, speech.synthesize("Same words twice."))
