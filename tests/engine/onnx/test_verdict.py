"""The stage cut's verdict: proven once per model and remembered; any doubt about the record means proving
it again. The record on its own, then three loads of the real model."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from koe.engine.assets import packaged_model_bytes
from koe.engine.base import SynthesisRequest
from koe.engine.onnx import stages
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.verdict import Verdict, VerdictKey


def _key(threads: int = 2) -> VerdictKey:
    return VerdictKey.of("ab" * 32, ["CPUExecutionProvider"], "all", threads, "plˈiz.")


def _audio(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(4_800).astype(np.float32)


def test_a_recorded_proof_confirms_the_same_probe_audio_only(tmp_path: Path) -> None:
    Verdict(tmp_path, _key()).remember(_audio())
    assert Verdict(tmp_path, _key()).confirms(_audio())
    assert not Verdict(tmp_path, _key()).confirms(_audio(1))
    changed = _audio()
    changed[100] = np.nextafter(changed[100], np.float32(1))  # one sample, one bit
    assert not Verdict(tmp_path, _key()).confirms(changed)


def test_nothing_recorded_is_no_proof(tmp_path: Path) -> None:
    assert not Verdict(tmp_path / "never-written", _key()).confirms(_audio())


def test_a_record_moved_under_another_key_is_no_proof(tmp_path: Path) -> None:
    proven, other = Verdict(tmp_path, _key(threads=2)), Verdict(tmp_path, _key(threads=4))
    proven.remember(_audio())
    other.path.write_bytes(proven.path.read_bytes())
    assert proven.path != other.path and not other.confirms(_audio())


@pytest.mark.parametrize(
    "tamper",
    [
        lambda record: "not json at all",
        lambda record: json.dumps({**record, "schema": "something else"}),
        lambda record: json.dumps({**record, "key": {**record["key"], "model_sha256": "cd" * 32}}),
        lambda record: json.dumps({**record, "probe_audio_sha256": "0" * 64}),
        lambda record: json.dumps({**record, "verified": True, "extra": 1}),
    ],
    ids=["garbage", "schema", "model", "digest", "extra-fields"],
)
def test_a_record_that_was_altered_is_no_proof(tmp_path: Path, tamper) -> None:  # type: ignore[no-untyped-def]
    verdict = Verdict(tmp_path, _key())
    verdict.remember(_audio())
    verdict.path.write_text(tamper(json.loads(verdict.path.read_text())))
    assert not verdict.confirms(_audio())


def test_a_cache_that_cannot_be_written_only_costs_a_proof(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with caplog.at_level(logging.WARNING, logger="koe.engine.onnx.verdict"):
        Verdict(blocked / "stage-cut", _key()).remember(_audio())
    assert "could not record" in caplog.text


@pytest.fixture
def proofs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[int]]:
    """A fresh cache for koe, and a count of the proofs run."""
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    prove = stages.verify

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return prove(*args, **kwargs)

    monkeypatch.setattr(stages, "verify", counted)
    yield calls


@pytest.mark.model
def test_the_cut_is_proven_once_per_model_and_the_next_load_skips_proof_and_whole_graph(
    proofs: list[int], tmp_path: Path
) -> None:
    model = packaged_model_bytes()
    options = OnnxOptions(threads=2)
    first = OnnxEngine(model, options)
    assert first.streaming is not None and len(proofs) == 1
    (record,) = (tmp_path / "stage-cut").iterdir()

    second = OnnxEngine(model, options)
    assert second.streaming is not None and len(proofs) == 1  # not proven again
    assert second._whole is None  # streams never need the single graph's session
    request = SynthesisRequest("hˈɛlO wˈɜɹld.", np.full((510, 1, 256), 0.1, dtype=np.float32))
    streamed = np.concatenate([e.audio for e in second.stream(request) if hasattr(e, "audio")])
    assert np.array_equal(streamed, second.synthesize(request))  # the whole graph, built now, agrees

    altered = json.loads(record.read_text())
    altered["probe_audio_sha256"] = "0" * 64
    record.write_text(json.dumps(altered))
    third = OnnxEngine(model, options)
    assert third.streaming is not None and len(proofs) == 2  # doubt: proven again, and recorded anew
    assert json.loads(record.read_text())["probe_audio_sha256"] != "0" * 64
