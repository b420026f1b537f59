"""What the streaming decoder's steps cost on this machine: stage A per token and one vocoder window
(:class:`DecodeCosts`), which size the windows (:mod:`koe.engine.onnx.windowing`) and let a scheduler price
each step. Provisional until measured, measured once per machine and kept.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import onnxruntime as ort

from koe.engine.onnx.stages import PROBE_PHONEMES as PROBE
from koe.engine.onnx.stages import FloatArray, Front, Probe, Stages, Statistics, run_probe, stoppable
from koe.engine.vocab import tokenize
from koe.errors import SynthesisError
from koe.machine import Measured
from koe.scheduler.cost import LinearCost

logger = logging.getLogger(__name__)

#: Input frames of the two windows timed to fit the cost model.
COST_PROBE_FRAMES = (16, 44)
#: The step costs a stream plans with until this machine's are measured (:meth:`DecodeCosts.measure`):
#: a window's fixed seconds and seconds per input frame, stage A's seconds per token, of the order
#: ``koe serve`` times on a small x86 CPU, so that a first start plans windows of a sensible size.
#: Every window decoded corrects their scale (:meth:`LinearCost.observe`).
PROVISIONAL_WINDOW_S = (0.052, 0.0067)
PROVISIONAL_FRONT_S_PER_TOKEN = 0.0033

_Fitted = tuple[LinearCost, float]  # the window's cost model, stage A's seconds per token


class DecodeCosts:
    """Stage A's seconds per token and the vocoder window's cost model: as ``measured`` kept them from an
    earlier start on this machine, or as :meth:`measure` timed them, else provisional
    (:data:`PROVISIONAL_WINDOW_S`): reading them never runs anything, so no stream waits for a measurement.
    Thread-safe."""

    def __init__(
        self, stages: Stages, probe: Probe | None, style_row: FloatArray, measured: Measured | None = None
    ) -> None:
        self._stages = stages
        self._style_row = style_row
        self._measured = measured
        #: the whole decode windows are timed on: its front, style row and statistics
        self._sample = None if probe is None else (probe.front, style_row, probe.statistics)
        self._fitted: _Fitted | None = None
        self._looked_up = False  # whether ``measured`` was read
        self._provisional: _Fitted = (LinearCost(*PROVISIONAL_WINDOW_S), PROVISIONAL_FRONT_S_PER_TOKEN)
        self._lock = threading.Lock()
        self._measuring = threading.Lock()

    @property
    def window(self) -> LinearCost:
        return self._current()[0]

    @property
    def front_s_per_token(self) -> float:
        return self._current()[1]

    @property
    def provisional(self) -> bool:
        """Whether the costs are not yet this machine's."""
        with self._lock:
            return self._fitted_locked() is None

    def offer(self, front: Front, style_row: FloatArray, statistics: Statistics) -> None:
        """A whole decode the windows may be timed on, so that :meth:`measure` needs no probe decode of its
        own; kept if none is yet and it is as long as the longest timed window."""
        if front.frames < COST_PROBE_FRAMES[-1] or self._sample is not None or self._fitted is not None:
            return  # read without the lock: this runs after every whole decode
        with self._lock:
            if self._sample is None and self._fitted is None:
                self._sample = (front, style_row, statistics)

    def measure(self, cancel: threading.Event | None = None) -> bool:
        """Time the costs now unless they were kept or timed before — about half a second, on the decode
        offered, else on the probe (decoded now where the load did not) — and adopt and keep them only if
        nothing else ran on the stages meanwhile (a busy machine would make them look dearer than they are)
        and ``cancel`` was not set (a :class:`Cancel` stops the run in progress). Returns whether the costs
        are this machine's now."""
        with self._measuring:
            with self._lock:
                if self._fitted_locked() is not None:
                    return True
                sample = self._sample
            try:
                timed = self._time(sample, stoppable(cancel))
            except SynthesisError:
                if cancel is None or not cancel.is_set():
                    raise
                timed = None
            if timed is None or (cancel is not None and cancel.is_set()):
                logger.info("window costs not measured: other work ran on the engine meanwhile")
                return False
            with self._lock:
                self._fitted, self._sample = timed, None  # timed: its tensors are not needed any more
            cost, front_s_per_token = timed
            if self._measured is not None:
                kept = {"fixed_s": cost.fixed_s, "per_frame_s": cost.per_unit_s}
                self._measured.write({**kept, "front_s_per_token": front_s_per_token})
            return True

    def _current(self) -> _Fitted:
        with self._lock:
            return self._fitted_locked() or self._provisional

    def _fitted_locked(self) -> _Fitted | None:
        """The costs kept or timed (``measured`` read once, on first need); the caller holds the lock."""
        if self._fitted is None and not self._looked_up:
            self._looked_up = True
            self._fitted = self._remembered()
            if self._fitted is not None:
                self._sample = None
        return self._fitted

    def _remembered(self) -> _Fitted | None:
        values = self._measured.read() if self._measured is not None else None
        if values is None:
            return None
        try:
            cost = LinearCost(float(values["fixed_s"]), float(values["per_frame_s"]))
            front_s_per_token = float(values["front_s_per_token"])
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("measuring the window costs again: the kept ones are not usable (%s)", exc)
            return None
        if not math.isfinite(front_s_per_token) or front_s_per_token <= 0:
            return None
        logger.info("window costs as measured before on this machine: %r", cost)
        return cost, front_s_per_token

    def _time(
        self, sample: tuple[Front, FloatArray, Statistics] | None, options: ort.RunOptions | None
    ) -> _Fitted | None:
        """The costs timed now, or ``None`` where another run began or was running meanwhile."""
        begun, running = self._stages.runs()
        own = 0
        if sample is None:
            probe = run_probe(self._stages, self._style_row, options)
            sample, own = (probe.front, self._style_row, probe.statistics), 2
        front, row, statistics = sample
        ids = tokenize(PROBE)
        started = time.perf_counter()
        self._stages.run_front(ids, row, 1.0, options)
        front_s_per_token = (time.perf_counter() - started) / len(ids)
        samples = []
        for frames in COST_PROBE_FRAMES:
            end = min(frames, front.frames)
            started = time.perf_counter()
            self._stages.decode_window(front, row, statistics, 0, end, options)
            samples.append((float(end), time.perf_counter() - started))
        own += 1 + len(COST_PROBE_FRAMES)
        if running or self._stages.runs()[0] - begun != own:
            return None
        cost = LinearCost.fit(samples)
        logger.info(
            "window cost %.0f ms + %.1f ms/frame, front %.1f ms/token",
            cost.fixed_s * 1e3, cost.per_unit_s * 1e3, front_s_per_token * 1e3,
        )  # fmt: skip
        return cost, front_s_per_token
