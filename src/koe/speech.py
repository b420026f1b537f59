"""Text → audio with one loaded model: G2P, token-window chunking, voices and the engine together.

This is what the server's workers, the agent and ``koe say`` share. Loading takes seconds (model, spaCy,
voices, a warm-up utterance); everything after is thread-safe.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from koe.engine.assets import (
    ModelSource,
    cache_dir,
    default_voices_dir,
    download_from_hugging_face,
    install_voices,
    local_source,
)
from koe.engine.base import Engine, SynthesisRequest
from koe.engine.onnx import OnnxEngine, OnnxOptions
from koe.engine.timing import WordSpan
from koe.engine.voices import AMERICAN, BRITISH, DEFAULT_VOICE, ENGLISH_VOICES, VoiceBank
from koe.errors import ConfigError
from koe.g2p.base import G2P
from koe.g2p.chunk import split_phonemes
from koe.g2p.misaki import MisakiG2P
from koe.params import LANGS, validate_lang, validate_speed
from koe.text.segment import Segmenter
from koe.types import SAMPLE_RATE, Audio, StyleTable

logger = logging.getLogger(__name__)

ENGINES = ("onnx", "torch")
_WARMUP_TEXT = "Hello there, this warms the model up."


@dataclass(frozen=True, slots=True)
class SpeechOptions:
    engine: str = "onnx"  # "onnx" (default, CPU or CUDA) or "torch" (koe[gpu]; docs/deploy.md)
    model_dir: Path | None = None  # a local directory with one .onnx (.pth for torch) and voices
    download: bool = False  # fetch fp32 ONNX + voices from Hugging Face (needs internet)
    threads: int | None = None  # ONNX Runtime intra-op threads per session
    graph_optimization: str = "all"
    voices: tuple[str, ...] = ENGLISH_VOICES
    warmup: bool = True
    windowed: bool = False  # windowed decoding in engine.stream() (docs/engine.md, "Streaming decoder")
    langs: tuple[str, ...] = field(default=LANGS)


@dataclass(frozen=True, slots=True)
class PhonemePiece:
    """One engine request's phonemes and the words spoken in it (phoneme spans relative to this piece,
    text spans in the text given to :meth:`Speech.phonemize_words`)."""

    phonemes: str
    words: tuple[WordSpan, ...]


def resolve_source(options: SpeechOptions) -> ModelSource:
    if options.engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {options.engine!r}")
    if options.model_dir is not None:
        return local_source(options.model_dir, ".pth" if options.engine == "torch" else ".onnx")
    if options.download:
        return download_from_hugging_face(
            cache_dir() / "hugging-face", list(options.voices), model=options.engine == "onnx"
        )
    install_voices(list(options.voices))
    return ModelSource(model_path=None, voices_dir=default_voices_dir())


def _load_engine(options: SpeechOptions, source: ModelSource) -> Engine:
    if options.engine == "torch":
        from koe.engine.torch import TorchEngine, TorchOptions, install_weights

        weights = source.model_path or (install_weights() if options.download else None)
        return TorchEngine.load(weights, TorchOptions(threads=options.threads))
    return OnnxEngine(
        source.model_bytes(),
        OnnxOptions(
            threads=options.threads,
            graph_optimization=options.graph_optimization,
            windowed=options.windowed,
        ),
    )


class Speech:
    """G2P + engine + voices, loaded once and shared by every worker thread."""

    sample_rate = SAMPLE_RATE

    def __init__(self, engine: Engine, voices: VoiceBank, g2p: dict[str, G2P]) -> None:
        self.engine = engine
        self.voices = voices
        self._g2p = g2p

    @classmethod
    def load(cls, options: SpeechOptions | None = None) -> Speech:
        """Load model, voices and G2P, then synthesize one warm-up sentence so the first request is fast."""
        options = options or SpeechOptions()
        started = time.perf_counter()
        source = resolve_source(options)
        engine = _load_engine(options, source)
        names = None if options.model_dir is not None else options.voices
        voices = VoiceBank.load(source.voices_dir, names)
        g2p: dict[str, G2P] = {lang: MisakiG2P(british=lang == BRITISH) for lang in options.langs}
        speech = cls(engine, voices, g2p)
        if options.warmup:
            speech.synthesize(_WARMUP_TEXT, voice=voices.names()[0])
        logger.info("speech loaded in %.1f s (%d voices)", time.perf_counter() - started, len(voices.names()))
        return speech

    def phonemize(self, text: str, lang: str = AMERICAN) -> list[str]:
        """Phoneme pieces of ``text``, each within the model's window; ``[]`` when nothing is speakable."""
        return [piece.phonemes for piece in self.phonemize_words(text, lang)]

    def phonemize_words(self, text: str, lang: str = AMERICAN) -> list[PhonemePiece]:
        """Like :meth:`phonemize`, with each piece's words: feed ``piece.words`` to the engine stream's
        ``SegmentTiming.words`` to time them."""
        g2p = self._g2p.get(validate_lang(lang))
        if g2p is None:
            raise ConfigError(f"lang {lang} is not loaded; loaded: {', '.join(self._g2p)}")
        if not text.strip():
            return []
        phonemes, spans = g2p.phonemize_words(text)
        pieces: list[PhonemePiece] = []
        cursor = 0
        for piece in split_phonemes(phonemes):  # pieces are substrings: the phonemes are already normalized
            offset = phonemes.find(piece, cursor)
            cursor = offset + len(piece)
            words = tuple(
                WordSpan(s.text_start, s.text_end, s.phoneme_start - offset, s.phoneme_end - offset)
                for s in spans
                if offset <= s.phoneme_start and s.phoneme_end <= cursor
            )
            pieces.append(PhonemePiece(piece, words))
        return pieces

    def synthesize_phonemes(self, phonemes: str, style: StyleTable, speed: float = 1.0) -> Audio:
        return self.engine.synthesize(SynthesisRequest(phonemes, style, validate_speed(speed)))

    def synthesize(
        self, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0, lang: str | None = None
    ) -> Audio:
        """Whole-text synthesis (no streaming), one segment at a time, so every sentence gets its own
        prosody and nothing is truncated; markdown, symbols and URLs are normalized as in streaming."""
        style = self.voices.resolve(voice)
        speed = validate_speed(speed)
        lang = lang or self.voices.lang_of(voice)
        segmenter = Segmenter()
        segments = [*segmenter.feed(text), *segmenter.flush()]
        audio = [
            self.synthesize_phonemes(piece, style, speed)
            for segment in segments
            for piece in self.phonemize(segment.spoken_text, lang)
        ]
        return np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
