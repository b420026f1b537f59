"""Window costs are timed on a whole decode already made when one is offered, else on the probe; once
timed on a machine, they are kept for its next start."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from koe.engine.onnx.decoder import _COST_PROBE_FRAMES, DecodeCosts
from koe.engine.onnx.stages import Front, Stages
from koe.machine import Measured


@dataclass
class _Front:
    frames: int


@dataclass
class _RecordingStages:
    """Stands in for the stage sessions: records what is decoded, on which front."""

    decoded_whole: int = 0
    windows: list[tuple[Any, int, int]] = field(default_factory=list)

    def run_front(self, ids: list[int], style_row: Any, speed: float) -> _Front:
        return _Front(80)

    def decode(self, front: _Front, style_row: Any) -> tuple[np.ndarray, tuple[()]]:
        self.decoded_whole += 1  # the probe's A→B decode
        return np.zeros(front.frames * 600, dtype=np.float32), ()

    def decode_window(self, front: Any, style_row: Any, statistics: Any, start: int, end: int) -> np.ndarray:
        self.windows.append((front, start, end))
        return np.zeros((end - start) * 600, dtype=np.float32)


_ROW = np.zeros((1, 256), dtype=np.float32)


def _costs(stages: _RecordingStages) -> DecodeCosts:
    return DecodeCosts(cast(Stages, stages), None, _ROW)


def test_an_offered_whole_decode_times_the_windows_without_a_probe_decode() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    offered = _Front(120)
    costs.offer(cast(Front, offered), _ROW, ())
    assert costs.window.per_unit_s > 0
    assert stages.decoded_whole == 0
    timed = [(front, end) for front, _start, end in stages.windows]
    assert timed == [(offered, frames) for frames in _COST_PROBE_FRAMES]


def test_a_decode_shorter_than_the_longest_timed_window_is_not_taken() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    short = _Front(_COST_PROBE_FRAMES[-1] - 1)
    costs.offer(cast(Front, short), _ROW, ())
    costs.window  # noqa: B018  # fitted on first read
    assert stages.decoded_whole == 1  # the probe instead
    assert all(front is not short for front, _start, _end in stages.windows)


def test_costs_are_timed_once_and_later_offers_are_ignored() -> None:
    stages = _RecordingStages()
    costs = _costs(stages)
    costs.offer(cast(Front, _Front(120)), _ROW, ())
    first = costs.window
    costs.offer(cast(Front, _Front(200)), _ROW, ())
    assert costs.window is first
    assert len(stages.windows) == len(_COST_PROBE_FRAMES)


def test_costs_timed_once_are_kept_and_a_later_start_times_nothing(tmp_path: Path) -> None:
    key = {"what": "vocoder window costs", "model": "test"}
    first = _RecordingStages()
    timed = DecodeCosts(cast(Stages, first), None, _ROW, Measured(tmp_path, key)).window
    later = _RecordingStages()
    costs = DecodeCosts(cast(Stages, later), None, _ROW, Measured(tmp_path, key))
    kept = costs.window
    assert (later.windows, later.decoded_whole) == ([], 0)
    assert (kept.fixed_s, kept.per_unit_s) == (timed.fixed_s, timed.per_unit_s)
    assert costs.front_s_per_token > 0


def test_costs_kept_under_another_key_or_damaged_are_timed_again(tmp_path: Path) -> None:
    DecodeCosts(cast(Stages, _RecordingStages()), None, _ROW, Measured(tmp_path, {"model": "a"})).window  # noqa: B018
    other = _RecordingStages()
    DecodeCosts(cast(Stages, other), None, _ROW, Measured(tmp_path, {"model": "b"})).window  # noqa: B018
    assert len(other.windows) == len(_COST_PROBE_FRAMES)
    measured = Measured(tmp_path, {"model": "a"})
    measured.write({"fixed_s": "fast", "per_frame_s": -1.0, "front_s_per_token": 0.001})
    damaged = _RecordingStages()
    DecodeCosts(cast(Stages, damaged), None, _ROW, measured).window  # noqa: B018
    assert len(damaged.windows) == len(_COST_PROBE_FRAMES)
    assert measured.read() is not None and measured.read()["fixed_s"] != "fast"  # replaced by the timing
