"""How fast this machine speaks, as the scheduler and the vocoder windows need to know: measured once per
machine, kept, and at a first start measured only after the server is ready, while it is idle.

Two things are measured (:class:`CostMeasurement`): the two utterances of :data:`TIMED`, timed through the
whole text path, fit the segment costs (:class:`~koe.scheduler.cost.SegmentCost`); then the engine is
prepared for the default voice (:meth:`Engine.prepare`: its windows' calibration and step costs), where
the server windows. Both give the same answer at every start on one machine, so both are kept
(:class:`koe.machine.Measured`) and a later start measures nothing.

A container's start is always a first start, and timing them cost ~2.7 s of its ~5.2 s to ``/ping`` 200
here (docs/operations.md, "Cold start"), which every autoscaling step pays. So a server that loaded its own
model becomes ready as soon as it is proven (:mod:`koe.server.warmup`) and speaks from the defaults the
cost models start with (measured on the 2-core development machine), corrected by every segment and
window it decodes; :meth:`CostMeasurement.when_idle` then measures each part when no session or request is
open and the scheduler has had nothing to do for :data:`QUIET_S` (a turn can leave it idle for over a
second while its listener plays what it has), as an exclusive job. A request that comes meanwhile waits for
the part running (at most ~1.1 s here) rather than sharing the two cores with it: beside one, a first
segment decoded in windows stuttered (4 gaps of 0.10–0.17 s in 2 runs of 3; one-off, 2026-12-02), and the
part's timing would be the busy machine's, not this one's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from koe.machine import Measured
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.server.warmup import PROOF

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The longer utterance of the two whose timings are fitted.
TIMING = "This sentence tells the server how fast it speaks."
#: What is timed, in order: part of the key its timings are kept under. The shorter is the G2P's proof.
TIMED = (PROOF, TIMING)
#: How long the scheduler must have been idle, with no session or request open, before a part begins.
QUIET_S = 1.0
#: Tries of the engine's preparation, which it refuses to measure while other work (a voice calibrating
#: in the background) ran on it; then the windows keep their provisional costs, corrected as they go.
ATTEMPTS = 3
#: Last in every queue: a live job queued at the same time starts first.
_LAST = math.inf

Sample = tuple[int, float, float]  # characters, seconds of audio, seconds of synthesis


class CostMeasurement:
    """The measurements of one server's start: ``speech`` speaking with ``voice``, its engine prepared for
    windows where ``windowed``; kept in ``measured``, whose key names :data:`TIMED` (``None``: keep
    nothing, for a model handed in, whose identity may not name all that sets its speed)."""

    def __init__(self, speech: Speech, voice: str, windowed: bool, measured: Measured | None) -> None:
        self._speech = speech
        self._voice = voice
        self._windowed = windowed
        self._measured = measured

    def kept(self) -> SegmentCost | None:
        """The segment costs an earlier start on this machine timed, if it did."""
        samples = _kept(self._measured.read()) if self._measured is not None else None
        if samples is None:
            return None
        logger.info("warm-up: %r and %r timed as before on this machine", PROOF, TIMING)
        return SegmentCost.fit(samples)

    def prepare(self) -> bool:
        """Prepare the engine for the voice's windows, where the server windows (see
        :meth:`Engine.prepare`); blocking. False where the engine could not measure alone."""
        return not self._windowed or self._speech.engine.prepare(self._speech.voices.resolve(self._voice))

    def now(self) -> SegmentCost:
        """Time both utterances, then prepare the engine (its windows timed on their decodes, not on a probe
        of its own), blocking, before the server is ready; kept. Raises what the engine or G2P raises."""
        samples = [self._timed(text) for text in TIMED]
        self._keep(samples)
        self.prepare()
        return SegmentCost.fit(samples)

    async def when_idle(
        self, scheduler: Scheduler, cost: SegmentCost, idle: Callable[[], bool], *, time_utterances: bool
    ) -> bool:
        """Measure on ``scheduler`` after the server is ready, each part once it has been quiet for
        :data:`QUIET_S` while ``idle()`` (no session or request open), as an exclusive job (nothing runs
        beside it; a live job that comes meanwhile waits for it): the utterances where ``time_utterances``
        (no earlier start kept them), whose fit ``cost`` adopts, then the engine's preparation, again
        while the engine says other work ran beside it (up to :data:`ATTEMPTS` times). Returns whether both
        are this machine's now. Raises what the engine or the G2P raises; cancelling is safe (a part
        running finishes in its worker)."""
        if time_utterances:
            samples = [
                await _exclusively(scheduler, idle, partial(self._timed, text), cost) for text in TIMED
            ]
            self._keep(samples)
            cost.adopt(SegmentCost.fit(samples))
            logger.info("measured this machine's segment costs: %s", cost)
        for _ in range(ATTEMPTS):
            if await _exclusively(scheduler, idle, self.prepare, cost):
                return True
            logger.info("measuring: other work ran beside the engine's step costs; again when idle")
        logger.info("measuring: the engine's step costs stay provisional after %d tries", ATTEMPTS)
        return False

    def _timed(self, text: str) -> Sample:
        started = time.perf_counter()
        audio = self._speech.synthesize(text, voice=self._voice)
        return len(text), len(audio) / self._speech.sample_rate, time.perf_counter() - started

    def _keep(self, samples: list[Sample]) -> None:
        if self._measured is not None:
            self._measured.write({"samples": [list(sample) for sample in samples]})


async def _exclusively(
    scheduler: Scheduler, idle: Callable[[], bool], part: Callable[[], T], cost: SegmentCost
) -> T:
    """``part`` as an exclusive job of the scheduler, last in its queue, once the scheduler has been quiet
    for :data:`QUIET_S` while ``idle()``: its result."""
    await scheduler.quiet(QUIET_S)
    while not idle():  # a turn between two jobs, or a session open: look again later
        await asyncio.sleep(QUIET_S)
        await scheduler.quiet(QUIET_S)
    return await scheduler.submit_exclusive(part, deadline=_LAST, cost_s=cost.synthesis_s(1.0))


def _kept(values: dict[str, Any] | None) -> list[Sample] | None:
    """The kept timings of :data:`TIMED`, if they are that."""
    samples = None if values is None else values.get("samples")
    if not (isinstance(samples, list) and len(samples) == len(TIMED)):
        return None
    kept: list[Sample] = []
    for text, sample in zip(TIMED, samples, strict=True):
        if not (isinstance(sample, list) and len(sample) == 3 and sample[0] == len(text)):
            return None
        _, audio_s, took_s = sample
        if not all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in (audio_s, took_s)):
            return None
        kept.append((len(text), audio_s, took_s))
    return kept
