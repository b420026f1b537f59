"""A simulated LLM: streams a given text as tokens at a set rate after a set first-token delay.

No model writes anything here: it is labelled "(simulation)" wherever it appears, and exists to show
and measure pure TTS streaming (the page's read-aloud mode, benchmarks, tests) with LLM-like timing.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from koe.agent.base import Message
from koe.errors import ConfigError

#: Sub-word pieces about the size of a BPE token: a leading space and up to 4 letters, or one symbol.
_TOKEN = re.compile(r"\s*(?:[^\W_]{1,4}|\S)|\s+")
#: Bounds a client may ask for: slower than 1 token/s or faster than 1000 is no LLM we imitate.
MIN_TOKENS_PER_S = 1.0
MAX_TOKENS_PER_S = 1000.0
MAX_FIRST_TOKEN_DELAY_S = 10.0
#: A brisk hosted LLM: ~30 tokens/s after ~0.3 s.
DEFAULT_TOKENS_PER_S = 30.0
DEFAULT_FIRST_TOKEN_DELAY_S = 0.3


def tokenize(text: str) -> list[str]:
    """Cut ``text`` into token-sized pieces that join back to exactly ``text``."""
    return _TOKEN.findall(text)


@dataclass(frozen=True, slots=True)
class ReplayPace:
    """How fast the replay "writes": ``tokens_per_s`` after a ``first_token_delay_s`` pause.

    Raises:
        ConfigError: a value outside its documented range (``invalid_field``).
    """

    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    first_token_delay_s: float = DEFAULT_FIRST_TOKEN_DELAY_S

    def __post_init__(self) -> None:
        if not (
            math.isfinite(self.tokens_per_s) and MIN_TOKENS_PER_S <= self.tokens_per_s <= MAX_TOKENS_PER_S
        ):
            raise ConfigError(
                f"tokens_per_s must be from {MIN_TOKENS_PER_S:g} to {MAX_TOKENS_PER_S:g}, "
                f"got {self.tokens_per_s}",
                code="invalid_field",
            )
        if not (
            math.isfinite(self.first_token_delay_s)
            and 0 <= self.first_token_delay_s <= MAX_FIRST_TOKEN_DELAY_S
        ):
            raise ConfigError(
                f"first_token_delay_s must be from 0 to {MAX_FIRST_TOKEN_DELAY_S:g}, "
                f"got {self.first_token_delay_s}",
                code="invalid_field",
            )


class ReplaySource:
    """Streams ``text`` whatever the conversation says (a simulation, not an LLM).

    Args:
        text: the "answer" to stream.
        pace: its rate and first-token delay.
    """

    simulated = True

    def __init__(self, text: str, pace: ReplayPace | None = None) -> None:
        self._tokens = tokenize(text)
        self._pace = pace or ReplayPace()
        self.label = f"replay (simulation, {self._pace.tokens_per_s:g} tokens/s)"

    async def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        """Yield the text's tokens on a steady clock (no drift from slow consumers); cancelling is safe."""
        loop = asyncio.get_running_loop()
        start = loop.time() + self._pace.first_token_delay_s
        interval = 1.0 / self._pace.tokens_per_s
        for n, token in enumerate(self._tokens):
            await asyncio.sleep(max(0.0, start + n * interval - loop.time()))
            yield token

    async def aclose(self) -> None:
        """Nothing to release."""
