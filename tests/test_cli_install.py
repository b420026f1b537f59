"""``koe install`` leaves in koe's cache what every start would otherwise compute: the stage cut's proof and
the default voice's windowing calibration, which an image then carries to every container (the real model,
in a cache of the test's own)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from koe.cli import prepare_onnx
from koe.engine.assets import cache_dir, locate
from koe.machine import MEASURED_DIR
from koe.settings import Settings

pytestmark = pytest.mark.slow


def test_install_calibrates_the_default_voice_and_keeps_the_cut_proven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    voices = locate("onnx", None, False, ["af_heart"]).voices_dir  # what `koe install` fetched
    shutil.copytree(cache_dir() / "stage-cut", tmp_path / "stage-cut")  # proven here before: no probe
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    prepare_onnx(Settings(default_voice="af_heart"), voices)
    assert len(list((tmp_path / "calibration").iterdir())) == 1
    assert list((tmp_path / "stage-cut").glob("*.json"))
    assert list((tmp_path / MEASURED_DIR).glob("*.json"))  # the window costs, for this CPU
