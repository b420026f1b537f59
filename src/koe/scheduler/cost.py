"""How long work takes: one linear cost model, fitted once and corrected as the machine's load changes.

Two things are priced with it: a whole segment (seconds of work per second of audio, plus an overhead)
by the turn streams, which also need how much speech a text makes (:class:`SegmentCost`); and one vocoder
window (per input frame, plus a fixed cost) by the ONNX engine's streaming decoder.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

#: Weight of the newest measurement in the running correction.
DEFAULT_LEARNING_RATE = 0.3
_MIN_SCALE, _MAX_SCALE = 0.25, 8.0


class LinearCost:
    """Seconds of work ≈ ``(fixed_s + per_unit_s × units) × scale``.

    ``fixed_s`` and ``per_unit_s`` are fitted from measurements (:meth:`fit`); ``scale`` follows the
    machine's current load from every job actually timed (:meth:`observe`): a job slower than ``scale``
    predicts with weight ``slowdown_rate`` (``learning_rate`` unless given), any other with
    ``learning_rate``. Thread-safe.
    """

    def __init__(
        self,
        fixed_s: float,
        per_unit_s: float,
        *,
        learning_rate: float = DEFAULT_LEARNING_RATE,
        slowdown_rate: float | None = None,
    ) -> None:
        if not (math.isfinite(fixed_s) and math.isfinite(per_unit_s)) or fixed_s < 0 or per_unit_s <= 0:
            raise ValueError(f"a cost model needs fixed ≥ 0 and per unit > 0 s; got {fixed_s}, {per_unit_s}")
        slowdown_rate = learning_rate if slowdown_rate is None else slowdown_rate
        for name, rate in (("learning_rate", learning_rate), ("slowdown_rate", slowdown_rate)):
            if not 0 < rate <= 1:
                raise ValueError(f"expected 0 < {name} <= 1, got {rate}")
        self.fixed_s = fixed_s
        self.per_unit_s = per_unit_s
        self._learning_rate = learning_rate
        self._slowdown_rate = slowdown_rate
        self._scale = 1.0
        self._lock = threading.Lock()

    @classmethod
    def fit(
        cls,
        samples: Sequence[tuple[float, float]],
        *,
        fixed_range: tuple[float, float] = (0.0, math.inf),
        per_unit_range: tuple[float, float] = (1e-4, math.inf),
        learning_rate: float = DEFAULT_LEARNING_RATE,
        slowdown_rate: float | None = None,
    ) -> LinearCost:
        """Least-squares line through ``(units, seconds)`` measurements of at least two sizes, its
        coefficients clamped to the ranges (a noisy warm-up on a shared machine must not give absurd ones).

        Raises:
            ValueError: fewer than two distinct sizes.
        """
        if len({round(units, 6) for units, _ in samples}) < 2:
            raise ValueError(f"fitting a cost model needs at least two sizes, got {len(samples)} samples")
        n = len(samples)
        mean_units = sum(units for units, _ in samples) / n
        mean_seconds = sum(seconds for _, seconds in samples) / n
        covariance = sum((u - mean_units) * (s - mean_seconds) for u, s in samples)
        variance = sum((u - mean_units) ** 2 for u, _ in samples)
        per_unit = _clamp(covariance / variance, per_unit_range)
        fixed = _clamp(mean_seconds - per_unit * mean_units, fixed_range)
        return cls(fixed, per_unit, learning_rate=learning_rate, slowdown_rate=slowdown_rate)

    @property
    def scale(self) -> float:
        return self._scale

    def predict(self, units: float) -> float:
        """Seconds of work for a job of ``units``."""
        return (self.fixed_s + self.per_unit_s * units) * self._scale

    def units_within(self, seconds: float) -> float:
        """The largest job (in units) that should finish within ``seconds``; may be ≤ 0."""
        return (seconds / self._scale - self.fixed_s) / self.per_unit_s

    def observe(self, units: float, seconds: float) -> None:
        """Fold one timed job into ``scale`` (exponential average, clamped against outliers)."""
        base = self.fixed_s + self.per_unit_s * units
        if base <= 0 or not math.isfinite(seconds):
            return
        ratio = _clamp(seconds / base, (_MIN_SCALE, _MAX_SCALE))
        with self._lock:
            rate = self._slowdown_rate if ratio > self._scale else self._learning_rate
            self._scale += rate * (ratio - self._scale)

    def __repr__(self) -> str:
        return f"LinearCost({self.fixed_s:.3f} s + {self.per_unit_s:.4f} s/unit, ×{self._scale:.2f})"


#: Bounds of a fitted segment cost: synthesis seconds per audio second, overhead, speech rate.
_RTF_RANGE = (0.05, 3.0)
_OVERHEAD_RANGE_S = (0.0, 2.0)
_CHARS_PER_S_RANGE = (5.0, 30.0)
#: Round figures for Kokoro int8 on a small CPU (1 worker × 2 threads): what a server plans with until
#: it has timed its own machine (:mod:`koe.server.measurement`); every finished segment corrects them.
DEFAULT_OVERHEAD_S = 0.35
DEFAULT_RTF = 0.55
DEFAULT_CHARS_PER_S = 14.0
#: Weight of a finished segment in the segment cost's scale.
SEGMENT_LEARNING_RATE = 0.2
#: Weight of a segment slower than the scale predicts: most of the slowdown is believed at once. A neighbour
#: taking a core, or another listener's segment starting beside this one, slows every segment after it, and
#: the next is cut to the slower machine before it, not three or four segments later; a faster segment is
#: believed slowly, so that a lull between two busy stretches does not make the next cut too long.
SEGMENT_SLOWDOWN_RATE = 0.6


class SegmentCost:
    """What one segment costs: synthesis ≈ ``overhead + rtf × audio seconds`` (a :class:`LinearCost`), and
    how much speech its text makes (``chars_per_s``). Both follow every finished segment."""

    def __init__(self, synthesis: LinearCost | None = None, chars_per_s: float = DEFAULT_CHARS_PER_S) -> None:
        self.synthesis = synthesis or LinearCost(
            DEFAULT_OVERHEAD_S,
            DEFAULT_RTF,
            learning_rate=SEGMENT_LEARNING_RATE,
            slowdown_rate=SEGMENT_SLOWDOWN_RATE,
        )
        self._chars_per_s = _clamp(chars_per_s, _CHARS_PER_S_RANGE)

    @classmethod
    def fit(cls, samples: Sequence[tuple[int, float, float]]) -> SegmentCost:
        """From ``(chars, audio_s, synthesis_s)`` samples of at least two audio lengths.

        Raises:
            ValueError: fewer than two distinct audio lengths.
        """
        synthesis = LinearCost.fit(
            [(audio, took) for _, audio, took in samples],
            fixed_range=_OVERHEAD_RANGE_S,
            per_unit_range=_RTF_RANGE,
            learning_rate=SEGMENT_LEARNING_RATE,
            slowdown_rate=SEGMENT_SLOWDOWN_RATE,
        )
        return cls(synthesis, sum(c for c, _, _ in samples) / sum(a for _, a, _ in samples))

    def adopt(self, measured: SegmentCost) -> None:
        """Take ``measured``'s cost model and speech rate in place of these (this machine's, timed after
        its server was already speaking from the defaults), keeping this object, which every stream holds."""
        self.synthesis = measured.synthesis
        self._chars_per_s = measured.chars_per_s

    @property
    def chars_per_s(self) -> float:
        return self._chars_per_s

    def audio_s(self, chars: int, speed: float = 1.0) -> float:
        """Estimated seconds of speech for ``chars`` characters at ``speed``."""
        return chars / (self._chars_per_s * speed)

    def synthesis_s(self, audio_s: float) -> float:
        """Estimated wall time to synthesize ``audio_s`` seconds of speech."""
        return self.synthesis.predict(audio_s)

    def chars_within(self, budget_s: float, speed: float = 1.0) -> int:
        """The longest text (characters) whose synthesis should finish within ``budget_s``; 0 if none."""
        audio = self.synthesis.units_within(budget_s)
        return max(0, math.floor(audio * self._chars_per_s * speed))

    def observe(self, chars: int, audio_s: float, took_s: float) -> None:
        """One segment: ``chars`` characters became ``audio_s`` seconds of audio in ``took_s`` seconds."""
        if audio_s <= 0:
            return
        self.synthesis.observe(audio_s, took_s)
        rate = _clamp(chars / audio_s, _CHARS_PER_S_RANGE)
        self._chars_per_s += SEGMENT_LEARNING_RATE * (rate - self._chars_per_s)

    def __repr__(self) -> str:
        return f"SegmentCost({self.synthesis!r}, {self._chars_per_s:.1f} chars/s)"


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])
