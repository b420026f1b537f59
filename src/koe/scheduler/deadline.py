"""When will a listener run out of audio, and how long may the next segment be so that it does not?

A listener plays audio in real time from the moment it arrives. :class:`PlaybackClock` follows that for
one session (or one streamed HTTP response); :class:`CostModel` says how long synthesis takes, so the
session can give each job its deadline and tell the segmenter how much text fits in the time it has.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Bounds on a fitted cost model: a noisy warm-up on a shared machine must not give absurd estimates.
_RTF_RANGE = (0.05, 3.0)
_OVERHEAD_RANGE_S = (0.0, 2.0)
_CHARS_PER_S_RANGE = (5.0, 30.0)


@dataclass(frozen=True, slots=True)
class CostModel:
    """Synthesis time ≈ ``overhead_s + rtf × audio seconds``; speech ≈ ``chars_per_s`` characters a second.

    The defaults are this project's measurements on a 2-core CPU (Kokoro int8, 1 worker × 2 threads);
    :meth:`fit` replaces them with the server's own warm-up timings.
    """

    overhead_s: float = 0.35
    rtf: float = 0.55
    chars_per_s: float = 14.0

    def audio_s(self, chars: int, speed: float = 1.0) -> float:
        """Estimated seconds of speech for ``chars`` characters at ``speed``."""
        return chars / (self.chars_per_s * speed)

    def synthesis_s(self, audio_s: float) -> float:
        """Estimated wall time to synthesize ``audio_s`` seconds of speech."""
        return self.overhead_s + self.rtf * audio_s

    def chars_within(self, budget_s: float, speed: float = 1.0) -> int:
        """The longest text (characters) whose synthesis should finish within ``budget_s``; 0 if none."""
        audio = (budget_s - self.overhead_s) / self.rtf
        return max(0, math.floor(audio * self.chars_per_s * speed))

    @classmethod
    def fit(cls, samples: Sequence[tuple[int, float, float]]) -> CostModel:
        """Least-squares fit from ``(chars, audio_s, synthesis_s)`` samples of at least two lengths.

        Raises:
            ValueError: fewer than two distinct audio lengths.
        """
        if len({round(audio, 3) for _, audio, _ in samples}) < 2:
            raise ValueError(f"need samples of at least two audio lengths, got {len(samples)} samples")
        n = len(samples)
        mean_audio = sum(audio for _, audio, _ in samples) / n
        mean_time = sum(took for _, _, took in samples) / n
        covariance = sum((audio - mean_audio) * (took - mean_time) for _, audio, took in samples)
        variance = sum((audio - mean_audio) ** 2 for _, audio, _ in samples)
        rtf = _clamp(covariance / variance, _RTF_RANGE)
        overhead = _clamp(mean_time - rtf * mean_audio, _OVERHEAD_RANGE_S)
        chars_per_s = _clamp(
            sum(c for c, _, _ in samples) / sum(a for _, a, _ in samples), _CHARS_PER_S_RANGE
        )
        return cls(overhead_s=overhead, rtf=rtf, chars_per_s=chars_per_s)


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


class CostTracker:
    """The current cost model, nudged by every finished job so that estimates follow the machine's load.

    Args:
        initial: the starting model (the warm-up fit, or the defaults).
        weight: how much one observation moves the estimate (exponential moving average).
    """

    def __init__(self, initial: CostModel, weight: float = 0.2) -> None:
        if not 0 < weight <= 1:
            raise ValueError(f"expected 0 < weight <= 1, got {weight}")
        self.model = initial
        self._weight = weight

    def observe(self, chars: int, audio_s: float, took_s: float) -> None:
        """One job: ``chars`` characters became ``audio_s`` seconds of audio in ``took_s`` seconds."""
        if audio_s <= 0:
            return
        m, w = self.model, self._weight
        rtf = _clamp(max(0.0, took_s - m.overhead_s) / audio_s, _RTF_RANGE)
        chars_per_s = _clamp(chars / audio_s, _CHARS_PER_S_RANGE)
        self.model = CostModel(
            m.overhead_s, (1 - w) * m.rtf + w * rtf, (1 - w) * m.chars_per_s + w * chars_per_s
        )


class PlaybackClock:
    """Follows one listener that plays audio in real time from its arrival and waits when it has none.

    Args:
        now: the monotonic clock (injectable so tests need not sleep).
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._until = -math.inf

    def delivered(self, audio_s: float) -> None:
        """``audio_s`` seconds more were handed to the listener."""
        self._until = max(self._now(), self._until) + audio_s

    def ahead_s(self) -> float:
        """Seconds of audio the listener still has to play (0 when it is waiting)."""
        return max(0.0, self._until - self._now())

    def deadline(self, pending_audio_s: float = 0.0) -> float:
        """When the listener needs the next audio, given ``pending_audio_s`` already on its way to it.

        With nothing playing and nothing pending this is *now*: a turn's first segment is due at once.
        """
        return max(self._now(), self._until) + pending_audio_s
