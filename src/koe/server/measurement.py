"""How fast this machine speaks, as the scheduler and the vocoder windows need to know: measured once per
machine, kept, and at a first start measured only after the server is ready, while it is idle.

Two things are measured (:class:`CostMeasurement`): the two utterances of :data:`TIMED`, timed through the
whole text path, fit the segment costs (:class:`~koe.scheduler.cost.SegmentCost`); then the engine is
prepared for the default voice (:meth:`Engine.prepare`: its windows' calibration and step costs), where
the server windows. Both give the same answer at every start on one machine, so both are kept
(:class:`koe.machine.Measured`) and a later start measures nothing.

A container's start is always a first start, and timing them before ``/ping`` turns 200 would make every
such start, which every autoscaling step pays, take seconds longer (docs/operations.md, "Cold start"). So
a server that loaded its own model becomes ready as soon as it is proven (:mod:`koe.server.warmup`) and
speaks from the defaults the cost models start with (:mod:`koe.scheduler.cost`,
:mod:`koe.engine.onnx.costs`), corrected by every segment and window it decodes;
:meth:`CostMeasurement.when_idle` then measures each part when no session or request is open and the
scheduler has had nothing to do for :data:`QUIET_S` (a turn can leave it idle for over a second while its
listener plays what it has), as an exclusive job that a live job stops at once (the engine's run in
progress ends within a node of its graph: :class:`~koe.engine.base.Cancel`), to be taken again later.
Sharing the cores with a part instead, a request's first segment decoded in windows stuttered, and
waiting for the part delayed its first word (docs/benchmarks.md, scenario 9); and a part's timing would
be the busy machine's, not this one's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from koe.engine.base import Cancel
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
#: Tries of each part, which gives way to live work (and the engine's preparation measures nothing while a
#: voice calibrates in the background); then the server keeps its defaults, corrected as they go.
ATTEMPTS = 5
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

    def prepare(self, cancel: threading.Event | None = None) -> bool:
        """Prepare the engine for the voice's windows, where the server windows (see
        :meth:`Engine.prepare`); blocking. False where the engine could not measure alone, or ``cancel``
        stopped it."""
        if not self._windowed:
            return True
        return self._speech.engine.prepare(self._speech.voices.resolve(self._voice), cancel)

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
        """Measure on ``scheduler`` after the server is ready, each part as an exclusive job once the
        scheduler has been quiet for :data:`QUIET_S` while ``idle()`` (no session or request open), stopped
        as soon as a live job comes, which then starts at once, and taken again later: the utterances where
        ``time_utterances`` (no earlier start kept them), whose fit ``cost`` adopts, then the engine's
        preparation. Returns whether both are this machine's now (False after :data:`ATTEMPTS` tries of a
        part). Raises what the engine or the G2P raises; cancelling is safe, and stops the part running."""
        if time_utterances:
            samples: list[Sample] = []
            for text in TIMED:
                sample = await _alone(scheduler, idle, partial(self._timed, text), cost)
                if sample is None:
                    return False
                samples.append(sample)
            self._keep(samples)
            cost.adopt(SegmentCost.fit(samples))
            logger.info("measured this machine's segment costs: %s", cost)
        return await _alone(scheduler, idle, self._prepared, cost) is not None

    def _timed(self, text: str, cancel: threading.Event | None = None) -> Sample:
        started = time.perf_counter()
        audio = self._speech.synthesize(text, voice=self._voice, cancel=cancel)
        return len(text), len(audio) / self._speech.sample_rate, time.perf_counter() - started

    def _prepared(self, cancel: threading.Event) -> bool | None:
        return self.prepare(cancel) or None

    def _keep(self, samples: list[Sample]) -> None:
        if self._measured is not None:
            self._measured.write({"samples": [list(sample) for sample in samples]})


async def _alone(
    scheduler: Scheduler, idle: Callable[[], bool], part: Callable[[Cancel], T | None], cost: SegmentCost
) -> T | None:
    """``part`` as an exclusive job of the scheduler, last in its queue, once the scheduler has been quiet
    for :data:`QUIET_S` while ``idle()``; its :class:`Cancel` set (the engine's run in progress stopped) as
    soon as another job is submitted. Its result; taken again, up to :data:`ATTEMPTS` times, where it was
    stopped or measured nothing (``None``)."""
    for _ in range(ATTEMPTS):
        await scheduler.quiet(QUIET_S)
        while not idle():  # a turn between two jobs, or a session open: look again later
            await asyncio.sleep(QUIET_S)
            await scheduler.quiet(QUIET_S)
        cancel = Cancel()
        try:
            result = await scheduler.submit_exclusive(
                partial(part, cancel), deadline=_LAST, cost_s=cost.synthesis_s(1.0), interrupt=cancel.set
            )
        except asyncio.CancelledError:
            cancel.set()  # the server is stopping: its engine run stops too
            raise
        if result is not None and not cancel.is_set():
            return result
        logger.info("measuring: a part gave way to live work or measured nothing; again when idle")
    logger.info("measuring: a part gave way %d times; the server speaks on from corrected defaults", ATTEMPTS)
    return None


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
