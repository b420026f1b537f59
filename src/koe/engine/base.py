"""The engine interface every backend implements: phonemes + style + speed → 24 kHz float32 audio.

The engine is language-blind (it never sees text); G2P and chunking happen upstream in :mod:`koe.g2p`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from koe.types import Audio, StyleTable

#: The model's context: 512 positions, two of them the padding tokens around the phonemes.
MAX_PHONEME_TOKENS = 510


@dataclass(frozen=True, slots=True)
class SynthesisRequest:
    """One utterance for the engine. ``phonemes`` holds at most :data:`MAX_PHONEME_TOKENS` symbols."""

    phonemes: str
    style: StyleTable
    speed: float = 1.0


class Engine(Protocol):
    """A loaded Kokoro-82M backend. Implementations must be safe to call from one worker thread each."""

    name: str
    sample_rate: int

    def synthesize(self, request: SynthesisRequest) -> Audio:
        """Synthesize one utterance. Raises ``SynthesisError`` for phonemes the model cannot take."""
        ...

    def synthesize_batch(self, requests: Sequence[SynthesisRequest]) -> list[Audio]:
        """Synthesize several utterances; backends that batch on an accelerator do it in one pass."""
        ...
