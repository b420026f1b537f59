"""Blend weights are free-form, so calibration must be bounded without the model: threads and files."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from koe.engine.onnx import calibration
from koe.engine.onnx.calibration import MAX_FILES, MAX_PENDING, Calibration
from koe.engine.onnx.moments import ClassMoments


def styles(count: int) -> list[np.ndarray]:
    """``count`` distinct style tables, as distinct blends would give."""
    return [np.full((4, 1, 8), n, dtype=np.float32) for n in range(count)]


def bare(directory: Path) -> Calibration:
    stages: Any = SimpleNamespace(statistic_names=("a",), norms=())
    return Calibration(stages, "0" * 64, directory)


def test_at_most_max_pending_calibrations_run_however_many_blends_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[np.ndarray] = []
    release = threading.Event()

    def slow(self: Calibration, style: np.ndarray) -> ClassMoments:
        started.append(style)
        release.wait(30)
        raise RuntimeError("not a real calibration")

    monkeypatch.setattr(Calibration, "calibrate", slow)
    cal = bare(tmp_path)
    before = threading.active_count()
    for style in styles(9):
        cal.calibrate_in_background(style)
    assert threading.active_count() - before == MAX_PENDING
    release.set()


def test_the_calibration_directory_keeps_the_most_recently_used_files(tmp_path: Path) -> None:
    cal = bare(tmp_path)
    moments = ClassMoments((np.zeros((2, 3)),), (np.ones((2, 3)),))
    for n in range(MAX_FILES + 5):
        cal._store(f"key{n:03d}", moments)
        os.utime(tmp_path / f"key{n:03d}.npz", (n, n))  # distinct ages, oldest first
    assert not (tmp_path / "key000.npz").exists()  # the oldest went first
    kept = sorted(p.stem for p in tmp_path.glob("*.npz"))
    assert len(kept) == MAX_FILES and kept[-1] == f"key{MAX_FILES + 4:03d}"


def test_reading_a_calibration_marks_it_recently_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cal = bare(tmp_path)
    monkeypatch.setattr(calibration.Calibration, "_problem", lambda self, moments: None)
    moments = ClassMoments((np.zeros((2, 3)),), (np.ones((2, 3)),))
    cal._store("old", moments)
    os.utime(tmp_path / "old.npz", (0, 0))
    assert cal._load("old") is not None
    assert (tmp_path / "old.npz").stat().st_mtime > 0
