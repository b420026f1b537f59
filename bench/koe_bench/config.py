"""What one ``koe bench`` run measures: the answer, its pace, repeats and limits, for a full or quick run.

The default answer is a realistic spoken reply in three paragraphs: a short first sentence, then long
sentences after short ones (where a plain sentence split leaves the listener waiting). At the replay's
default pace (30 tokens/s after 0.3 s) its first sentence is complete after ~0.6 s and the whole answer
after ~5 s: the seed's figures for a hosted LLM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from koe.agent.replay import ReplayPace
from koe.errors import ConfigError

ANSWER = (
    "Sure, here's how to get there. Take the Red Line north to Central Station, then switch to the Blue "
    "Line toward the airport; trains come every six minutes during the day.\n\n"
    "The ride takes about twenty-five minutes. Get off at Harbor Street, walk two blocks east past the "
    "bakery, and the museum is on your left, right across from the fountain.\n\n"
    "If you'd rather not transfer, the 42 bus goes there directly, but it's slower at rush hour. Bring a "
    "jacket, it gets windy by the water."
)
#: Two short paragraphs: enough for every strategy to differ, short enough for a smoke run.
QUICK_ANSWER = (
    "Sure, here's the short version. Take the Red Line north to Central Station.\n\n"
    "The ride takes about twenty minutes."
)
VOICE = "af_heart"
#: First sentence written → first audio above this fails a capacity level (koe's target for one session is
#: ~0.8 s; this allows for sessions sharing the cores).
TTFA_THRESHOLD_S = 1.5
#: US$ per vCPU-hour that a listener-hour's cost is priced at: an AWS c7i.large (2 vCPU) on demand in
#: us-east-1, $0.08925 an hour, over its 2 vCPUs. ``koe bench --vcpu-price`` prices at another.
VCPU_PRICE_USD_PER_HOUR = 0.0446
#: A quick run reads this many corpus texts (spread over the groups) instead of the whole corpus.
QUICK_READING_SAMPLE = 2
ENGINE_SIZES = (16, 32, 64, 128, 256, 384, 500)
#: The interpreter of the peer servers' own environment (``make bench-peers``).
PEER_PYTHON = Path(".venv-peers/bin/python")
#: The interpreter of wyoming-piper's own environment (``make bench-peers``).
PIPER_PYTHON = Path(".venv-wyoming-piper/bin/python")
QUICK_ENGINE_SIZES = (16, 64, 128)


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """One run's parameters; ``for_run`` fills in the full or quick defaults.

    Attributes:
        url: a running koe server (``None``: start one in this process).
        repeats: runs of each strategy in the agent and peer scenarios.
        barge_ins: cancels in the barge-in scenario (p95 from 20 on).
        max_sessions: the largest capacity level tried.
        capacity_rounds: rounds of each capacity level (it passes when most of them do).
        hog: busy processes beside the capacity ladder, each keeping one core busy (0: a quiet machine).
        vcpu_price: US$ per vCPU-hour, for the capacity ladder's cost of a listener-hour.
        peer_python: the interpreter of fastkokoro's environment (missing: that peer is left out).
        piper_python: the interpreter of wyoming-piper's environment (missing: that peer is left out).
        opener_rounds: rounds over the openers in the openers scenario.
        cold_repeats: fresh processes of each kind in the cold-start scenario (0: skipped).
        reading_sample: corpus texts the reading scenario speaks (``None``: all of them).
        only: run this scenario alone (``koe bench --only``), ``None``: every scenario.
    """

    out: Path
    quick: bool = False
    url: str | None = None
    answer: str = ANSWER
    pace: ReplayPace = field(default_factory=ReplayPace)
    voice: str = VOICE
    repeats: int = 5
    barge_ins: int = 20
    max_sessions: int = 8
    capacity_rounds: int = 3
    hog: int = 0
    vcpu_price: float = VCPU_PRICE_USD_PER_HOUR
    ttfa_threshold_s: float = TTFA_THRESHOLD_S
    engine_sizes: tuple[int, ...] = ENGINE_SIZES
    engine_repeats: int = 3
    opener_rounds: int = 3
    cold_repeats: int = 3
    seed: int = 7
    peer_python: Path = PEER_PYTHON
    piper_python: Path = PIPER_PYTHON
    reading_sample: int | None = None
    only: str | None = None

    def __post_init__(self) -> None:
        for name in ("cold_repeats", "hog"):
            if getattr(self, name) < 0:
                raise ConfigError(f"bench {name}: expected an integer >= 0, got {getattr(self, name)}")
        if not (math.isfinite(self.vcpu_price) and self.vcpu_price > 0):
            raise ConfigError(f"bench vcpu price: expected US$ per vCPU-hour > 0, got {self.vcpu_price}")
        for name in (
            "repeats",
            "barge_ins",
            "max_sessions",
            "capacity_rounds",
            "engine_repeats",
            "opener_rounds",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"bench {name}: expected an integer >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.ttfa_threshold_s) and self.ttfa_threshold_s > 0):
            raise ConfigError(f"bench ttfa threshold: expected seconds > 0, got {self.ttfa_threshold_s}")
        if self.reading_sample is not None and self.reading_sample < 1:
            raise ConfigError(f"bench reading_sample: expected an integer >= 1, got {self.reading_sample}")
        if not self.answer.strip():
            raise ConfigError("bench answer: expected some text, got none")

    @classmethod
    def for_run(
        cls,
        out: Path,
        *,
        quick: bool,
        url: str | None = None,
        pace: ReplayPace | None = None,
        repeats: int | None = None,
        max_sessions: int | None = None,
        ttfa_threshold_s: float | None = None,
        peer_python: Path | None = None,
        piper_python: Path | None = None,
        only: str | None = None,
        hog: int = 0,
        vcpu_price: float | None = None,
    ) -> BenchConfig:
        """Full or quick defaults, then the given overrides (``None`` keeps the default)."""
        config = cls(out, quick, url, only=only, hog=hog)
        if quick:
            config = replace(
                config,
                answer=QUICK_ANSWER,
                repeats=1,
                barge_ins=2,
                max_sessions=2,
                capacity_rounds=1,
                engine_sizes=QUICK_ENGINE_SIZES,
                engine_repeats=1,
                opener_rounds=1,
                cold_repeats=0,  # fresh processes loading the model: a minute even once
                reading_sample=QUICK_READING_SAMPLE,
            )
        return replace(
            config,
            pace=config.pace if pace is None else pace,
            repeats=config.repeats if repeats is None else repeats,
            max_sessions=config.max_sessions if max_sessions is None else max_sessions,
            ttfa_threshold_s=config.ttfa_threshold_s if ttfa_threshold_s is None else ttfa_threshold_s,
            peer_python=config.peer_python if peer_python is None else peer_python,
            piper_python=config.piper_python if piper_python is None else piper_python,
            vcpu_price=config.vcpu_price if vcpu_price is None else vcpu_price,
        )
