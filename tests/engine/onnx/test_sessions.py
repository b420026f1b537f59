"""Sessions come from the graph ONNX Runtime optimized at an earlier start, on this CPU or another, and
compute the same bits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from koe import machine
from koe.engine.assets import MODEL_SHA256, packaged_model_bytes
from koe.engine.onnx import sessions
from koe.engine.onnx.dequantize import dequantized
from koe.engine.onnx.sessions import KEPT_GRAPHS, OptimizedSessions
from koe.pipeline.speech import SpeechOptions
from koe.settings import Settings

_ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
_EXTENDED = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
_BASIC = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
_NONE = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
_CPU = ["CPUExecutionProvider"]


def _graph(scale: float) -> bytes:
    """``relu(x @ w + b)``: a MatMul and an Add that ONNX Runtime fuses when it optimizes."""
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], (np.arange(12) * scale).tolist())
    bias = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["xwb"]),
        helper.make_node("Relu", ["xwb"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [weights, bias],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


_X = np.array([[1.0, -2.0, 3.0, 0.25]], dtype=np.float32)


def _run(session: ort.InferenceSession) -> Any:
    return session.run(None, {"x": _X})[0]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each session ONNX Runtime is asked to build: what from (``file`` or ``bytes``) and at which level."""
    calls: list[tuple[str, int]] = []
    real = ort.InferenceSession

    def recording(source: Any, options: ort.SessionOptions, **kwargs: Any) -> ort.InferenceSession:
        calls.append(("file" if isinstance(source, str) else "bytes", int(options.graph_optimization_level)))
        return real(source, options, **kwargs)

    monkeypatch.setattr(sessions.ort, "InferenceSession", recording)
    return calls


def test_the_graph_is_kept_optimized_up_to_extended_and_sessions_at_all_are_built_from_it(
    tmp_path: Path, built: list[tuple[str, int]]
) -> None:
    first = OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))
    later = OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))
    # optimized once up to "extended" and written; each session then applies "all" to the written graph
    assert built == [("bytes", int(_EXTENDED)), ("file", int(_ALL)), ("file", int(_ALL))]
    assert len(list(tmp_path.glob("*.onnx"))) == 1
    np.testing.assert_array_equal(_run(later), _run(first))


def test_a_graph_kept_at_the_level_asked_for_is_loaded_without_optimizing(
    tmp_path: Path, built: list[tuple[str, int]]
) -> None:
    OptimizedSessions(1, _BASIC, _CPU, tmp_path)(_graph(1.0))
    OptimizedSessions(1, _BASIC, _CPU, tmp_path)(_graph(1.0))
    assert built == [("bytes", int(_BASIC)), ("file", int(_NONE))]


def test_graphs_kept_on_one_cpu_serve_another(
    tmp_path: Path, built: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for flags in (
        "avx2 fma sse4_2",
        "avx512f avx512bw avx2 fma sse4_2",
    ):  # an image's build machine, then not
        cpuinfo = tmp_path / f"cpuinfo {len(flags)}"
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        monkeypatch.setattr(machine, "_CPUINFO", cpuinfo)
        OptimizedSessions(1, _ALL, _CPU, tmp_path / "optimized")(_graph(1.0))
    assert [source for source, _level in built] == ["bytes", "file", "file"]


def test_a_graph_kept_in_a_read_only_cache_is_used(
    tmp_path: Path, built: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))

    def read_only(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Read-only file system", str(path))

    monkeypatch.setattr(sessions.os, "utime", read_only)  # an image's cache, as its unprivileged user sees it
    session = OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))
    assert [source for source, _level in built] == ["bytes", "file", "file"]
    np.testing.assert_array_equal(_run(session), _run(OptimizedSessions(1, _ALL, _CPU)(_graph(1.0))))


def test_a_session_not_to_keep_writes_nothing_but_uses_a_kept_graph(
    tmp_path: Path, built: list[tuple[str, int]]
) -> None:
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0), keep=False)
    assert not list(tmp_path.glob("*.onnx"))
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0), keep=False)
    assert [source for source, _level in built] == ["bytes", "bytes", "file", "file"]


def test_another_graph_or_level_is_optimized_afresh(tmp_path: Path, built: list[tuple[str, int]]) -> None:
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))
    OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(2.0))
    OptimizedSessions(1, _BASIC, _CPU, tmp_path)(_graph(1.0))
    assert [source for source, _level in built].count("bytes") == 3
    assert len(list(tmp_path.glob("*.onnx"))) == 3


def test_a_damaged_kept_graph_is_optimized_again_and_replaced(tmp_path: Path) -> None:
    expected = _run(OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0)))
    (kept,) = tmp_path.glob("*.onnx")
    kept.write_bytes(b"not a graph")
    np.testing.assert_array_equal(_run(OptimizedSessions(1, _ALL, _CPU, tmp_path)(_graph(1.0))), expected)
    onnx.load_from_string(kept.read_bytes())  # a graph again


def test_only_the_graphs_used_last_are_kept(tmp_path: Path) -> None:
    factory = OptimizedSessions(1, _ALL, _CPU, tmp_path)
    factory(_graph(0.0))
    (oldest,) = tmp_path.glob("*.onnx")
    os.utime(oldest, (1.0, 1.0))
    for scale in range(1, KEPT_GRAPHS + 1):
        factory(_graph(float(scale)))
    assert len(list(tmp_path.glob("*.onnx"))) == KEPT_GRAPHS and not oldest.exists()


def test_a_cache_that_cannot_be_written_still_gives_a_session(tmp_path: Path) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    session = OptimizedSessions(1, _ALL, _CPU, blocked / "optimized")(_graph(1.0))
    np.testing.assert_array_equal(_run(session), _run(ort.InferenceSession(_graph(1.0), providers=_CPU)))


def _kokoro_feeds(seed: int, tokens: int) -> dict[str, np.ndarray]:
    """Kokoro's inputs: ``tokens`` random phoneme ids between the pads, a random style, speed 1."""
    rng = np.random.default_rng(seed)
    return {
        "tokens": np.array([[0, *rng.integers(1, 150, tokens), 0]], dtype=np.int64),
        "style": (rng.standard_normal((1, 256)) * 0.2).astype(np.float32),
        "speed": np.array([1.0], dtype=np.float32),
    }


@pytest.mark.model
def test_kokoros_graph_from_its_kept_optimized_form_decodes_the_same_bits(tmp_path: Path) -> None:
    model = packaged_model_bytes()
    OptimizedSessions(2, _ALL, _CPU, tmp_path)(model)  # optimizes and keeps it
    kept = OptimizedSessions(2, _ALL, _CPU, tmp_path)(model)
    fresh = OptimizedSessions(2, _ALL, _CPU)(model)  # optimized in memory from the model's bytes, as before
    feeds = _kokoro_feeds(seed=3, tokens=40)
    audio = fresh.run(None, feeds)[0]
    assert audio.size > 0
    np.testing.assert_array_equal(kept.run(None, feeds)[0], audio)


@pytest.mark.model
def test_kokoro_decodes_the_same_bits_without_a_memory_pattern(tmp_path: Path) -> None:
    """Allocating each tensor when it is needed (sessions.MEMORY_PATTERN) moves tensors, not arithmetic: the
    float vocoder's model decodes a length seen before, which a pattern lays out, to the same bits."""
    rewritten = dequantized(packaged_model_bytes(), MODEL_SHA256, tmp_path)
    assert rewritten is not None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.enable_mem_pattern = True
    patterned = ort.InferenceSession(rewritten.model, options, providers=_CPU)
    ours = OptimizedSessions(2, _ALL, _CPU)(rewritten.model)
    feeds = _kokoro_feeds(seed=5, tokens=30)
    first = patterned.run(None, feeds)[0]
    again = patterned.run(None, feeds)[0]  # laid out by the pattern the first run left
    np.testing.assert_array_equal(again, first)
    for _ in range(2):
        np.testing.assert_array_equal(ours.run(None, feeds)[0], again)


def test_sessions_allocate_each_tensor_when_it_is_needed_not_by_a_remembered_layout(tmp_path: Path) -> None:
    """A memory pattern holds about a fifth more at a decode's peak (sessions.MEMORY_PATTERN); kept on disk
    or not, a session is built without it."""
    make = OptimizedSessions(1, _ALL, _CPU, tmp_path)
    for session in (make(_graph(1.0)), make(_graph(1.0)), make(_graph(2.0), keep=False)):
        assert session.get_session_options().enable_mem_pattern is False


@pytest.mark.parametrize("spin", [True, False])
def test_sessions_spin_between_operators_only_when_asked(tmp_path: Path, spin: bool) -> None:
    """Off where the engine's threads outnumber the cores: a spinning thread would hold a core another
    worker or the event loop needs. A session kept optimized on disk is built with the setting too."""
    for _ in range(2):  # optimized now, then from the graph kept
        session = OptimizedSessions(1, _ALL, _CPU, tmp_path, spin=spin)(_graph(1.0))
        entry = session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
        assert entry == ("1" if spin else "0")


def test_the_server_s_engine_spins_only_when_its_threads_fit_the_cores() -> None:
    cores = machine.usable_cores()
    fits = SpeechOptions.from_settings(Settings(workers=1, threads_per_worker=cores)).engine
    crowded = SpeechOptions.from_settings(Settings(workers=2, threads_per_worker=cores)).engine
    assert (fits.spin, crowded.spin) == (True, False)


def test_cpu_sessions_allocate_from_the_one_arena_that_every_run_shrinks(tmp_path: Path) -> None:
    """Kept on disk or not, a CPU session takes the process's arena (kSameAsRequested, one for all), and a
    run asking to shrink it finds an arena there (ONNX Runtime refuses the run otherwise)."""
    make = OptimizedSessions(1, _ALL, _CPU, tmp_path)
    for session in (make(_graph(1.0)), make(_graph(1.0)), make(_graph(2.0), keep=False)):
        assert session.get_session_options().get_session_config_entry(sessions.USE_SHARED_ARENA) == "1"
        assert session.run(None, {"x": _X}, sessions.releasing())[0].shape == (1, 3)
