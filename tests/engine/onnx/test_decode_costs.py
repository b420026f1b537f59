"""Window costs are provisional until measured; measured on a whole decode already made when one is
offered, else on the probe; adopted only when nothing else ran on the stages meanwhile; and once measured on
a machine, kept for its next start."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from koe.engine.base import Cancel
from koe.engine.onnx.costs import COST_PROBE_FRAMES, PROVISIONAL_WINDOW_S, DecodeCosts
from koe.engine.onnx.stages import Front, Stages
from koe.machine import Measured


@dataclass
class _Front:
    frames: int


@dataclass
class _RecordingStages:
    """Stands in for the stage sessions: records what is decoded, on which front, and counts its runs;
    ``beside`` runs of another thread begin during the first window timed."""

    decoded_whole: int = 0
    windows: list[tuple[Any, int, int]] = field(default_factory=list)
    begun: int = 0
    beside: int = 0

    def runs(self) -> tuple[int, int]:
        return self.begun, 0

    def run_front(self, ids: list[int], style_row: Any, speed: float, options: Any = None) -> _Front:
        self.begun += 1
        return _Front(80)

    def decode(self, front: _Front, style_row: Any, options: Any = None) -> tuple[np.ndarray, tuple[()]]:
        self.begun += 1
        self.decoded_whole += 1  # the probe's A→B decode
        return np.zeros(front.frames * 600, dtype=np.float32), ()

    def decode_window(
        self, front: Any, style_row: Any, statistics: Any, start: int, end: int, options: Any = None
    ) -> np.ndarray:
        self.begun += 1 + self.beside
        self.beside = 0
        self.windows.append((front, start, end))
        return np.zeros((end - start) * 600, dtype=np.float32)


_ROW = np.zeros((1, 256), dtype=np.float32)


def _costs(stages: _RecordingStages, measured: Measured | None = None) -> DecodeCosts:
    return DecodeCosts(cast(Stages, stages), None, _ROW, measured)


def test_costs_are_provisional_until_measured_and_reading_them_runs_nothing() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    assert (costs.window.fixed_s, costs.window.per_unit_s) == PROVISIONAL_WINDOW_S
    assert costs.front_s_per_token > 0 and costs.provisional
    assert (stages.begun, stages.windows) == (0, [])


def test_an_offered_whole_decode_times_the_windows_without_a_probe_decode() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    offered = _Front(120)
    costs.offer(cast(Front, offered), _ROW, ())
    assert costs.measure() and not costs.provisional
    assert costs.window.per_unit_s > 0
    assert stages.decoded_whole == 0
    timed = [(front, end) for front, _start, end in stages.windows]
    assert timed == [(offered, frames) for frames in COST_PROBE_FRAMES]


def test_a_decode_shorter_than_the_longest_timed_window_is_not_taken() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    short = _Front(COST_PROBE_FRAMES[-1] - 1)
    costs.offer(cast(Front, short), _ROW, ())
    assert costs.measure()
    assert stages.decoded_whole == 1  # the probe instead
    assert all(front is not short for front, _start, _end in stages.windows)


def test_costs_are_timed_once_and_later_offers_are_ignored() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    costs.offer(cast(Front, _Front(120)), _ROW, ())
    assert costs.measure()
    first = costs.window
    costs.offer(cast(Front, _Front(200)), _ROW, ())
    assert costs.measure()
    assert costs.window is first
    assert len(stages.windows) == len(COST_PROBE_FRAMES)


def test_a_measurement_beside_another_run_is_neither_adopted_nor_kept_and_is_taken_again(
    tmp_path: Path,
) -> None:
    measured = Measured(tmp_path, {"what": "vocoder window costs", "model": "test"})
    stages = _RecordingStages(beside=1)
    costs = _costs(stages, measured)
    assert not costs.measure()
    assert costs.provisional and measured.read() is None
    assert costs.measure()  # alone this time
    assert not costs.provisional and measured.read() is not None
    assert len(stages.windows) == 2 * len(COST_PROBE_FRAMES)


def test_costs_measured_once_are_kept_and_a_later_start_times_nothing(tmp_path: Path) -> None:
    key = {"what": "vocoder window costs", "model": "test"}
    first = _costs(_RecordingStages(), Measured(tmp_path, key))
    assert first.measure()
    later = _RecordingStages()
    costs = _costs(later, Measured(tmp_path, key))
    assert not costs.provisional and costs.measure()
    kept = costs.window
    assert (later.windows, later.begun) == ([], 0)
    assert (kept.fixed_s, kept.per_unit_s) == (first.window.fixed_s, first.window.per_unit_s)
    assert costs.front_s_per_token == first.front_s_per_token


def test_costs_kept_under_another_key_or_damaged_are_provisional_then_timed_again(tmp_path: Path) -> None:
    assert _costs(_RecordingStages(), Measured(tmp_path, {"model": "a"})).measure()
    other = _RecordingStages()
    elsewhere = _costs(other, Measured(tmp_path, {"model": "b"}))
    assert elsewhere.provisional and elsewhere.measure()
    assert len(other.windows) == len(COST_PROBE_FRAMES)
    measured = Measured(tmp_path, {"model": "a"})
    measured.write({"fixed_s": "fast", "per_frame_s": -1.0, "front_s_per_token": 0.001})
    damaged = _RecordingStages()
    costs = _costs(damaged, measured)
    assert costs.provisional and costs.measure()
    assert len(damaged.windows) == len(COST_PROBE_FRAMES)
    assert measured.read() is not None and measured.read()["fixed_s"] != "fast"  # replaced by the timing


def test_a_measurement_cancelled_is_neither_adopted_nor_kept(tmp_path: Path) -> None:
    measured = Measured(tmp_path, {"what": "vocoder window costs", "model": "test"})
    costs = _costs(_RecordingStages(), measured)
    cancel = Cancel()
    cancel.set()
    assert not costs.measure(cancel)
    assert costs.provisional and measured.read() is None
