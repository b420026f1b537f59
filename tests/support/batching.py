"""The check that masked batching keeps: a segment synthesized with others sounds as it does alone. Shared by
the CPU and CUDA tests of the torch engine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from koe.engine.base import Engine, SynthesisRequest
from koe.engine.quality import compare
from koe.pipeline.speech import Speech

#: Log-mel distance and level below which two takes are the same to the ear (the model's own take-to-take
#: variation is ~3 dB; float reordering in a batch measured 0.05-0.11 dB, docs/benchmarks/torch_parity.json).
SAME_TAKE_DB = 0.25


def request(speech: Speech, text: str, voice: str, speed: float = 1.0) -> SynthesisRequest:
    """One sentence's engine request (a single phoneme piece)."""
    (phonemes,) = speech.phonemize(text)
    return SynthesisRequest(phonemes, speech.voices.resolve(voice), speed)


def assert_batch_members_sound_as_alone(engine: Engine, requests: Sequence[SynthesisRequest]) -> None:
    """One call of all ``requests`` (different lengths) against one call each: same durations and take."""
    batched = engine.synthesize_batch(requests)
    assert len({u.audio.size for u in batched}) == len(requests)  # different lengths share the pass
    for one, together in zip(requests, batched, strict=True):
        (alone,) = engine.synthesize_batch([one])
        assert alone.timing is not None and together.timing is not None
        assert np.array_equal(alone.timing.durations, together.timing.durations)
        difference = compare(together.audio, alone.audio)
        assert difference.distance_db < SAME_TAKE_DB and abs(difference.level_db) < SAME_TAKE_DB
