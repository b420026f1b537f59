"""The stage cut's verdict: proven once per model and machine and remembered; any doubt about the record
means proving it again. The record on its own, then loads of the real model."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from koe.engine.assets import packaged_model_bytes
from koe.engine.base import SynthesisRequest, drain
from koe.engine.onnx import costs, stages
from koe.engine.onnx import verdict as verdicts
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.verdict import Verdict, VerdictKey


def _key(threads: int = 2, model: str = "ab" * 32) -> VerdictKey:
    return VerdictKey.of(model, ["CPUExecutionProvider"], "all", threads, "plˈiz.")


def _audio(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(4_800).astype(np.float32)


def test_a_recorded_proof_holds_for_its_own_key_only(tmp_path: Path) -> None:
    Verdict(tmp_path, _key()).remember(_audio())
    assert Verdict(tmp_path, _key()).proven()
    assert not Verdict(tmp_path, _key(model="cd" * 32)).proven()  # other model bytes: proven afresh
    assert not Verdict(tmp_path, _key(threads=4)).proven()


def test_a_proof_from_another_cpu_holds_here_only_once_the_probe_decodes_to_the_same_bytes(
    tmp_path: Path,
) -> None:
    Verdict(tmp_path, _key(), cpu="the build machine").remember(_audio())
    here = Verdict(tmp_path, _key(), cpu="this machine")
    assert not here.proven()  # a probe must be decoded here first
    assert here.confirms(_audio()) and not here.confirms(_audio(1))
    here.remember(_audio())
    assert here.proven() and Verdict(tmp_path, _key(), cpu="the build machine").proven()
    Verdict(tmp_path, _key(), cpu="a third").remember(_audio(1))  # other bytes: a fresh proof, alone
    assert not here.proven() and Verdict(tmp_path, _key(), cpu="a third").proven()


def test_nothing_recorded_is_no_proof(tmp_path: Path) -> None:
    assert not Verdict(tmp_path / "never-written", _key()).proven()


def test_a_record_moved_under_another_key_is_no_proof(tmp_path: Path) -> None:
    proven, other = Verdict(tmp_path, _key(threads=2)), Verdict(tmp_path, _key(threads=4))
    proven.remember(_audio())
    other.path.write_bytes(proven.path.read_bytes())
    assert proven.path != other.path and not other.proven()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda record: "not json at all",
        lambda record: "[1, 2]",
        lambda record: json.dumps({**record, "schema": "something else"}),
        lambda record: json.dumps({**record, "key": {**record["key"], "model_sha256": "cd" * 32}}),
        lambda record: json.dumps({**record, "cpus": "not a list"}),
        lambda record: json.dumps({**record, "probe_audio_sha256": "not a digest"}),
        lambda record: json.dumps({k: v for k, v in record.items() if k != "probe_audio_sha256"}),
        lambda record: json.dumps({**record, "verified": True, "extra": 1}),
    ],
    ids=["garbage", "not-an-object", "schema", "model", "cpus", "digest", "no-digest", "extra-fields"],
)
def test_a_record_that_was_altered_is_no_proof(tmp_path: Path, tamper) -> None:  # type: ignore[no-untyped-def]
    verdict = Verdict(tmp_path, _key())
    verdict.remember(_audio())
    verdict.path.write_text(tamper(json.loads(verdict.path.read_text())))
    assert not verdict.proven() and not verdict.confirms(_audio())


def test_a_cache_that_cannot_be_written_only_costs_a_proof(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with caplog.at_level(logging.WARNING, logger="koe.engine.onnx.verdict"):
        Verdict(blocked / "stage-cut", _key()).remember(_audio())
    assert "could not record" in caplog.text


@pytest.fixture
def proofs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, int]]:
    """A fresh cache for koe, and a count of the probes decoded and proofs run."""
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    calls = {"probe": 0, "proof": 0}
    probe, prove = stages.run_probe, stages.verify

    def counted_probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["probe"] += 1
        return probe(*args, **kwargs)

    def counted_proof(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["proof"] += 1
        return prove(*args, **kwargs)

    monkeypatch.setattr(stages, "run_probe", counted_probe)
    monkeypatch.setattr(costs, "run_probe", counted_probe)
    monkeypatch.setattr(stages, "verify", counted_proof)
    yield calls


def _other_bytes_of_the_same_graph(model: bytes) -> bytes:
    proto = onnx.load_from_string(model)
    proto.metadata_props.add(key="koe-test", value="other bytes")
    return proto.SerializeToString()


@pytest.mark.model
def test_the_cut_is_proven_once_per_model_and_the_next_load_runs_no_probe_and_no_whole_graph(
    proofs: dict[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged_model_bytes()
    options = OnnxOptions(threads=2, spin=False)  # no spinning: another test worker shares the cores
    first = OnnxEngine(model, options)
    assert first.streaming is not None and proofs == {"probe": 1, "proof": 1}
    (record,) = (tmp_path / "stage-cut").iterdir()
    del first

    second = OnnxEngine(model, options)
    assert second.streaming is not None and proofs == {"probe": 1, "proof": 1}  # nothing run again
    assert second._whole is None  # streams never need the single graph's session
    request = SynthesisRequest("hˈɛlO wˈɜɹld.", np.full((510, 1, 256), 0.1, dtype=np.float32))
    streamed = np.concatenate([e.audio for e in second.stream(request) if hasattr(e, "audio")])
    assert np.array_equal(streamed, second.synthesize(request))  # the whole graph, built now, agrees
    long_enough = SynthesisRequest(f"{stages.PROBE_PHONEMES} {stages.PROBE_PHONEMES}", request.style)
    drain(second.stream(long_enough))
    assert second.streaming.costs.measure()  # measured now, on that whole decode
    assert proofs == {"probe": 1, "proof": 1}  # no probe decoded for them
    assert costs.DecodeCosts(second.streaming.stages, None, request.style[0]).measure()
    assert proofs == {"probe": 2, "proof": 1}  # offered nothing, the costs decode the probe when asked
    del second

    monkeypatch.setattr(verdicts, "cpu_identity", lambda: "another machine's CPU")
    elsewhere = OnnxEngine(model, options)  # a container started where it was not built
    assert elsewhere.streaming is not None and proofs == {"probe": 3, "proof": 1}  # a probe, no proof
    assert "another machine's CPU" in json.loads(record.read_text())["cpus"]
    del elsewhere

    third = OnnxEngine(_other_bytes_of_the_same_graph(model), options)
    assert third.streaming is not None and proofs == {"probe": 4, "proof": 2}  # other bytes: proven anew
    assert len(list((tmp_path / "stage-cut").iterdir())) == 2 and record.exists()
