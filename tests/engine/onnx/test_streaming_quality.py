"""The quality gate for windowed decoding, on held-out sentences with several voices and speeds.

Windows are small and fixed (the most joins). What passes: transcripts equal the whole decode's, the
log-mel distance to it and the level stay within the model's ~3 dB take-to-take variation, and joins stand
out by at most 1 dB from the rest of the utterance (measured against a whole decode with the same
estimated statistics, which isolates windowing). What fails: spectral balance — the worst mel band's mean
level still differs by more than 3 dB on some sentences, because the statistics are estimated, not the
segment's own; so windowing is not the default (docs/engine.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from koe.engine.base import AudioChunk, SynthesisRequest
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.moments import quiet_fraction
from koe.engine.quality import compare
from koe.engine.vocab import tokenize
from koe.pipeline.speech import Speech
from koe.settings import Settings
from support import Transcriber, words

pytestmark = pytest.mark.slow

#: Not the calibration sentences, nor the probe.
HELD_OUT = [
    ("af_heart", 0.8, "The museum opens at noon, so we can sleep late."),
    ("am_michael", 1.3, "Turn left after the bridge and park behind the library."),
    ("bf_emma", 1.0, "My sister painted the kitchen yellow last summer."),
]
TAKE_TO_TAKE_DB = 3.0
SEAM_MARGIN_DB = 1.0
WINDOW_FRAMES = 12


Decoded = dict[str, object]
Case = tuple[str, float, str]


@pytest.fixture(scope="module")
def decodings() -> dict[Case, Decoded]:
    """Each case is decoded once for the whole module (three decodes of a sentence each)."""
    return {}


def _decode(speech: Speech, streaming: StreamingDecoder, cache: dict[Case, Decoded], case: Case) -> Decoded:
    if case in cache:
        return cache[case]
    voice, speed, text = case
    (phonemes,) = speech.phonemize(text, speech.voices.lang_of(voice))
    style = speech.voices.resolve(voice)
    request = SynthesisRequest(phonemes, style, speed)
    segment = streaming.stream(request, window_frames=WINDOW_FRAMES, windowed=True)
    chunks = [event for event in segment if isinstance(event, AudioChunk)]
    ids = tokenize(phonemes)
    row = style[len(ids) - 1]
    front = streaming.stages.run_front(ids, row, speed)
    moments = streaming.calibration.lookup(style)
    assert moments is not None
    statistics = moments.statistics(streaming.stages.norms, quiet_fraction(front.energy))
    cache[case] = {
        "windowed": np.concatenate([chunk.audio for chunk in chunks]),
        "joins": [chunk.start for chunk in chunks[1:]],
        "whole": speech.engine.synthesize(request),
        "frozen": streaming.stages.decode_window(front, row, statistics, 0, front.frames),
    }
    return cache[case]


@pytest.mark.parametrize(("voice", "speed", "text"), HELD_OUT)
def test_windowed_speech_is_heard_as_the_whole_decode_with_unremarkable_joins(
    speech: Speech,
    streaming: StreamingDecoder,
    transcribe: Transcriber,
    decodings: dict[Case, Decoded],
    voice: str,
    speed: float,
    text: str,
) -> None:
    decoded = _decode(speech, streaming, decodings, (voice, speed, text))
    windowed, whole, frozen = (decoded[key] for key in ("windowed", "whole", "frozen"))
    joins = decoded["joins"]
    assert all(isinstance(audio, np.ndarray) for audio in (windowed, whole, frozen))
    assert isinstance(joins, list) and len(joins) >= 5
    heard = words(transcribe(windowed))
    assert heard == words(transcribe(whole))
    assert heard == words(text)
    against_whole = compare(windowed, whole)
    assert against_whole.distance_db <= TAKE_TO_TAKE_DB
    assert abs(against_whole.level_db) <= TAKE_TO_TAKE_DB
    seams = compare(windowed, frozen, joins)
    assert seams.seam_db <= seams.elsewhere_db + SEAM_MARGIN_DB


def test_windowing_is_not_the_default_because_estimated_statistics_miss_the_balance_gate(
    speech: Speech, streaming: StreamingDecoder, decodings: dict[Case, Decoded]
) -> None:
    """If better statistics ever pass here, revisit the default (and this test will say so by failing)."""
    worst = 0.0
    for case in HELD_OUT:
        decoded = _decode(speech, streaming, decodings, case)
        windowed, whole = decoded["windowed"], decoded["whole"]
        assert isinstance(windowed, np.ndarray) and isinstance(whole, np.ndarray)
        worst = max(worst, compare(windowed, whole).balance_db)
    assert worst > TAKE_TO_TAKE_DB
    assert Settings().windowed is False
