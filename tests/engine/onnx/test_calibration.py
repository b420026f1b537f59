"""Calibration is computed once per voice, cached on disk, and a damaged cache file is never used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from koe.engine.onnx.calibration import Calibration
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.moments import CLASSES
from koe.pipeline.speech import Speech


@pytest.fixture(scope="module")
def cached(streaming: StreamingDecoder, speech: Speech, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory holding am_michael's calibration, computed here once (~5 s)."""
    directory = tmp_path_factory.mktemp("calibration")
    fresh = Calibration(streaming.stages, streaming.calibration.model_sha256, directory, background=False)
    moments = fresh.calibrate(speech.voices.resolve("am_michael"))
    assert len(moments.first) == len(streaming.stages.norms)
    assert all(first.shape[0] == len(CLASSES) for first in moments.first)
    return directory


def test_a_calibrated_voice_is_read_back_from_disk_by_the_next_process(
    streaming: StreamingDecoder, speech: Speech, cached: Path
) -> None:
    (stored,) = cached.glob("*.npz")
    later = Calibration(streaming.stages, streaming.calibration.model_sha256, cached, background=False)
    style = speech.voices.resolve("am_michael")
    loaded = later.lookup(style)
    assert loaded is not None and stored.stem == later.key(style)
    reference = streaming.calibration.calibrate(style)  # the session's own, same recipe
    for ours, theirs in zip(loaded.first + loaded.second, reference.first + reference.second, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert later.lookup(speech.voices.resolve("af_heart")) is None  # another voice, another key


@pytest.mark.parametrize("damage", ["not a zip", "nan", "shape", "other model"])
def test_a_damaged_cache_file_is_ignored_with_a_warning(
    streaming: StreamingDecoder,
    speech: Speech,
    cached: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    damage: str,
) -> None:
    (stored,) = cached.glob("*.npz")
    target = tmp_path / stored.name
    if damage == "not a zip":
        target.write_bytes(b"PK\x03\x04 truncated")
    else:
        with np.load(stored) as archive:
            arrays = {name: archive[name] for name in archive.files}
        if damage == "nan":
            arrays["first_3"] = np.full_like(arrays["first_3"], np.nan)
        elif damage == "shape":
            arrays["second_0"] = arrays["second_0"][:, :-1]
        else:
            arrays["names"] = arrays["names"][::-1]
        np.savez(target, **arrays)  # type: ignore[arg-type]
    damaged = Calibration(streaming.stages, streaming.calibration.model_sha256, tmp_path, background=False)
    with caplog.at_level(logging.WARNING, logger="koe.engine.calibration"):
        assert damaged.lookup(speech.voices.resolve("am_michael")) is None
    assert "ignoring" in caplog.text and stored.name in caplog.text
