"""The few shapes the torch engine pads its passes to, so that a device meets each before traffic does.

On a GPU every new tensor shape can cost a one-off price on first use (execution plans, growth of the
caching allocator, kernels loaded lazily) that would land on some listener's first audio, and a CUDA graph
holds one shape only. Padding each pass's width up to a ladder of widths, and its rows up to a power of
two, leaves a few dozen shapes, each of which the engine can run once at start. The masking in
:mod:`koe.engine.kmodel.forward` makes the padding inert: a member sounds the same in any bucket.

The ladders end at the largest width the model can be given, derived, not guessed: for the text pass the
510-token window plus its two padding tokens; for the acoustic pass every one of those tokens at the
longest duration the duration head can predict (``max_dur`` sigmoids summed, each below one) at the
slowest speed a listener can ask for. Pure arithmetic: no torch.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from koe.engine.vocab import MAX_PHONEME_TOKENS
from koe.errors import ConfigError
from koe.wire.params import MIN_SPEED

#: The padding token the text pass puts at each end of an utterance.
PAD_TOKENS = 2
#: Smallest widths: below them a pass is so small that padding it costs next to nothing.
TOKEN_FLOOR = 16
FRAME_FLOOR = 32
#: Rungs per doubling. Text widths double (ALBERT on 512 tokens is cheap next to the acoustic pass);
#: frame widths grow by √2, so padding costs at most 41 % of a pass (powers of two would cost up to 100 %)
#: for twice as many shapes to warm.
TOKEN_RUNGS = 1
FRAME_RUNGS = 2

Shape = tuple[int, int]


def ladder(floor: int, cap: int, rungs_per_doubling: int) -> tuple[int, ...]:
    """Widths from ``floor`` growing by ``2 ** (1 / rungs_per_doubling)`` (rounded to the nearest integer,
    so every doubling of ``floor`` is on it exactly), ending at ``cap``.

    Raises:
        ConfigError: a floor below 1, a cap below the floor, or fewer than one rung per doubling.
    """
    if floor < 1 or cap < floor or rungs_per_doubling < 1:
        raise ConfigError(
            f"bucket ladder: expected 1 <= floor <= cap and rungs >= 1, got floor {floor}, cap {cap}, "
            f"rungs {rungs_per_doubling}"
        )
    widths: list[int] = []
    step = 0
    while (width := round(floor * 2 ** (step / rungs_per_doubling))) < cap:
        widths.append(width)
        step += 1
    return (*widths, cap)


def row_ladder(max_batch: int) -> tuple[int, ...]:
    """Row counts a pass is padded to: the powers of two below ``max_batch``, then ``max_batch``."""
    return (*(1 << n for n in range(max_batch.bit_length()) if 1 << n < max_batch), max_batch)


def token_cap() -> int:
    """The widest text pass: the model's window plus the padding token at each end."""
    return MAX_PHONEME_TOKENS + PAD_TOKENS


def frame_cap(max_duration: int, min_speed: float = MIN_SPEED) -> int:
    """The widest acoustic pass: every token of :func:`token_cap` at the longest duration the duration
    head predicts (``max_duration`` sigmoids summed, so below ``max_duration``), divided by the slowest
    speed, rounded as the text pass rounds (to the nearest frame, so at most the ceiling)."""
    return token_cap() * math.ceil(max_duration / min_speed)


def fit(widths: tuple[int, ...], needed: int) -> int:
    """The smallest of ``widths`` that holds ``needed``; ``needed`` itself past the last (a speed below the
    slowest a listener can ask for): such a pass runs at its own width rather than fail."""
    index = bisect_left(widths, needed)
    return widths[index] if index < len(widths) else needed


@dataclass(frozen=True, slots=True)
class Buckets:
    """The engine's ladders: rows per pass, text-pass widths (padding tokens included), acoustic widths."""

    rows: tuple[int, ...]
    tokens: tuple[int, ...]
    frames: tuple[int, ...]

    @classmethod
    def for_model(cls, max_duration: int, max_batch: int) -> Buckets:
        """The ladders for a model whose duration head predicts up to ``max_duration`` frames a token."""
        return cls(
            row_ladder(max_batch),
            ladder(TOKEN_FLOOR, token_cap(), TOKEN_RUNGS),
            ladder(FRAME_FLOOR, frame_cap(max_duration), FRAME_RUNGS),
        )

    def text_shape(self, rows: int, width: int) -> Shape:
        """The bucket of a text pass of ``rows`` utterances, the longest ``width`` tokens with padding."""
        return fit(self.rows, rows), fit(self.tokens, width)

    def acoustic_shape(self, rows: int, width: int) -> Shape:
        """The bucket of an acoustic pass of ``rows`` utterances, the longest ``width`` frames."""
        return fit(self.rows, rows), fit(self.frames, width)

    def plan(self, limit: int) -> tuple[list[Shape], list[Shape]]:
        """The text and acoustic buckets of at most ``limit`` rows × width, smallest first: what warming
        runs."""
        return _within(self.rows, self.tokens, limit), _within(self.rows, self.frames, limit)


def _within(rows: tuple[int, ...], widths: tuple[int, ...], limit: int) -> list[Shape]:
    shapes = [(r, w) for r in rows for w in widths if r * w <= limit]
    return sorted(shapes, key=lambda shape: (shape[0] * shape[1], shape[0]))
