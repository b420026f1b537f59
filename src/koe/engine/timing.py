"""When each word is spoken: per-token durations (from the model's front stage) → seconds per phoneme span.

The engine is language-blind, so it times *phoneme* spans; G2P says which phoneme characters belong to
which word of its input text (:class:`WordSpan`), and :meth:`SegmentTiming.words` joins the two. Times are
seconds from the start of the segment's audio; the caller adds the segment's offset within the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koe.engine.vocab import vocabulary
from koe.errors import SynthesisError
from koe.types import SAMPLE_RATE

#: One model frame is 600 samples (25 ms at 24 kHz); every token lasts a whole number of frames.
FRAME_SAMPLES = 600


@dataclass(frozen=True, slots=True)
class WordSpan:
    """One word as G2P saw it: characters ``[text_start, text_end)`` of its input text, spoken as
    characters ``[phoneme_start, phoneme_end)`` of the phoneme string given to the engine."""

    text_start: int
    text_end: int
    phoneme_start: int
    phoneme_end: int


@dataclass(frozen=True, slots=True)
class WordTiming:
    """A word of the text (its character span) and when it is spoken, in seconds from the segment start."""

    text_start: int
    text_end: int
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class SegmentTiming:
    """Durations of a segment's model tokens, padding tokens included: ``[pad, *phoneme tokens, pad]``.

    ``sum(durations) * FRAME_SAMPLES`` is the segment's length in samples, exactly.
    """

    phonemes: str
    durations: npt.NDArray[np.int64]

    @property
    def frames(self) -> int:
        return int(self.durations.sum())

    @property
    def samples(self) -> int:
        return self.frames * FRAME_SAMPLES

    @property
    def lead_frames(self) -> int:
        """Frames of the leading padding token: silence before the first phoneme."""
        return int(self.durations[0])

    def span_seconds(self, phoneme_start: int, phoneme_end: int) -> tuple[float, float]:
        """Start and end, in seconds, of phoneme characters ``[phoneme_start, phoneme_end)``.

        Characters outside the model's vocabulary have no token (the engine drops them); a span made only
        of such characters gets zero length at the position where it would be spoken.
        """
        if not 0 <= phoneme_start <= phoneme_end <= len(self.phonemes):
            raise SynthesisError(
                f"phoneme span [{phoneme_start}, {phoneme_end}) is outside 0..{len(self.phonemes)}"
            )
        vocab = vocabulary()
        first = 1 + sum(1 for symbol in self.phonemes[:phoneme_start] if symbol in vocab)  # 1: leading pad
        count = sum(1 for symbol in self.phonemes[phoneme_start:phoneme_end] if symbol in vocab)
        bounds = self._token_bounds()
        if first + count >= len(bounds):
            raise SynthesisError(
                f"durations cover {len(bounds) - 1} tokens but the phonemes need {first + count + 1}"
            )
        scale = FRAME_SAMPLES / SAMPLE_RATE
        return float(bounds[first]) * scale, float(bounds[first + count]) * scale

    def words(self, spans: Sequence[WordSpan]) -> list[WordTiming]:
        """Time every word; spans must lie inside :attr:`phonemes` (as G2P produced them)."""
        timings = []
        for span in spans:
            start_s, end_s = self.span_seconds(span.phoneme_start, span.phoneme_end)
            timings.append(WordTiming(span.text_start, span.text_end, start_s, end_s))
        return timings

    def _token_bounds(self) -> npt.NDArray[np.int64]:
        """Frame index where each token starts, plus the total: ``len(durations) + 1`` values."""
        bounds: npt.NDArray[np.int64] = np.concatenate(([0], np.cumsum(self.durations))).astype(np.int64)
        return bounds
