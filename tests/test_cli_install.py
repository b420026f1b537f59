"""``koe install`` leaves in koe's cache what every start would otherwise compute: the stage cut's proof, the
stage graphs ONNX Runtime optimized, the default voice's windowing calibration and its G2P's grown
dictionaries, which an image then carries to every container (the real model, in a cache of the test's
own)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from koe.engine.assets import cache_dir, locate
from koe.g2p.lexicon import grown_dictionary
from koe.machine import MEASURED_DIR
from koe.prepared import prepare_g2p, prepare_onnx
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
    assert len(list((tmp_path / "optimized").glob("*.onnx"))) == 3  # the stages, for any CPU


def test_install_keeps_the_default_voices_grown_dictionaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    prepare_g2p(Settings(default_voice="bf_emma(1)+af_heart(1)"))  # a blend speaks its first voice's
    assert len(list((tmp_path / "g2p").glob("*.marshal"))) == 2

    def regrown(words: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the kept dictionary was not found")

    for kind in ("gold", "silver"):  # British English's, read back without growing them
        assert grown_dictionary(f"gb_{kind}.json", regrown)
