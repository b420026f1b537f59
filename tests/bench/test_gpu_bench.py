"""``koe bench --engine torch``: the capacity ladder, batching on and off, on CPU with a tiny ladder and the
weights derived from the int8 model (what a GPU run does at full size)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from koe.errors import ConfigError
from koe.pipeline.speech import Speech
from koe.settings import Settings
from koe_bench.capacity import Level, LevelUsage
from koe_bench.gpu import (
    QUICK_LADDER,
    GpuBenchConfig,
    _passes_between,
    _shapes,
    _without_buckets,
    cores_per_session,
    run,
    write,
)
from koe_bench.stats import summarize

ANSWER = "Sure. The museum opens at nine."
SCRIPT = Path(__file__).parents[2] / "bench" / "gpu_ladder.sh"


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.bench_smoke
def test_the_ladder_runs_on_cpu_in_both_modes_and_writes_its_results(
    torch_speech: Speech, tmp_path: Path
) -> None:
    config = GpuBenchConfig(tmp_path, "cpu", ladder=(1,), rounds=1, answer=ANSWER, batch_sizes=(1, 2))
    settings = Settings(port=0, engine="torch", device="cpu", batch_max_segments=64)
    report = run(config, torch_speech, settings, "koe bench --engine torch --device cpu")
    batched, unbatched = report["modes"]["batched"], report["modes"]["unbatched"]
    assert (batched["batch_max_segments"], unbatched["batch_max_segments"]) == (64, 1)
    for mode in (batched, unbatched):
        (level,) = mode["levels"]
        assert level["sessions"] == 1 and level["audio_per_wall_s"] > 0
        assert 0 < level["cpu_cores_per_session"] <= 2  # the server's CPU, on at most this machine's cores
        assert mode["max_sessions_ok"] in (None, 1)
        assert mode["memory_mb"]["rss_now"] > 0
    assert batched["levels"][0]["calls"]["calls"] >= 1  # segments went through shared calls
    assert unbatched["levels"][0]["calls"]["calls"] == 0  # one job per segment: no shared calls
    assert [row["batch"] for row in report["engine"]] == [1, 2]
    assert all(row["audio_per_wall_s"] > 0 for row in report["engine"])
    assert report["machine"]["engine"] == report["ladder_engine"] == "torch on cpu (dequantized int8 weights)"
    # on the CPU the engine pads nothing, so there is no twin without buckets to compare with
    assert report["shapes"]["buckets"] is None and "engine_without_buckets" not in report
    assert {row["pass"] for row in batched["passes"]} == {"text", "acoustic"}
    assert all(row["count"] >= 1 for row in batched["passes"])
    paths = write(report, tmp_path)
    assert json.loads(paths["json"].read_text())["plot"] == "bench-torch-cpu.png"
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sessions_share_of_a_core_is_the_servers_cpu_over_the_levels_wall_time_per_session() -> None:
    once = summarize([0.1])
    level = Level(
        sessions=4,
        first_audio_after_sentence_s=once,
        first_audio_after_sentence_worst_s=0.1,
        worst_is="max",
        gap_count=0,
        gap_total_s=0.0,
        gaps_per_listener=once,
        silence_per_listener_s=once,
        max_gap_s=0.0,
        audio_s=80.0,
        rtf=None,
        audio_per_wall_s=4.0,
        rounds=1,
        rounds_ok=1,
        ok=True,
        refused={},
    )
    usage = LevelUsage(
        cpu_s=12.0, client_cpu_s=2.0, audio_per_cpu_s=8.0, rss_peak_mb=None, rss_peak_over_start=None
    )
    # 80 audio-s at 4 a second: 20 s of wall time; the server's 10 CPU-s (the clients' 2 left out) over it
    # keep half a core busy, an eighth of one per session
    assert cores_per_session(level, usage) == pytest.approx(0.125)


def test_max_sessions_cuts_the_ladder_and_is_its_last_rung(tmp_path: Path) -> None:
    assert GpuBenchConfig.for_run(tmp_path, "cuda", quick=False, max_sessions=20).ladder == (
        1,
        2,
        4,
        8,
        16,
        20,
    )
    assert GpuBenchConfig.for_run(tmp_path, "cpu", quick=True).ladder == QUICK_LADDER


@pytest.mark.parametrize("ladder", [(), (2, 1), (0, 1)])
def test_a_ladder_must_rise_from_one_session(tmp_path: Path, ladder: tuple[int, ...]) -> None:
    with pytest.raises(ConfigError, match="rising session counts"):
        GpuBenchConfig(tmp_path, ladder=ladder)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the gpu extra is not installed")
@pytest.mark.skipif(_cuda_available(), reason="this machine has CUDA: the script would run")
def test_the_gpu_script_stops_at_once_on_a_machine_without_cuda(tmp_path: Path) -> None:
    """``bench/gpu_ladder.sh`` checks the device before it installs or measures anything."""
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "'cuda' was requested but torch sees no CUDA device" in done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["bench-torch-machine.txt"]


def test_passes_between_two_counts_are_the_shapes_a_ladder_ran() -> None:
    before = {("text", 1, 16): 2, ("acoustic", 1, 45): 1}
    after = {("text", 1, 16): 5, ("acoustic", 1, 45): 1, ("acoustic", 2, 64): 3}
    assert _passes_between(before, after) == [
        {"pass": "acoustic", "rows": 2, "width": 64, "count": 3},
        {"pass": "text", "rows": 1, "width": 16, "count": 3},
    ]


def test_a_bucketed_engine_is_compared_with_its_twin_without_buckets(torch_speech: Speech) -> None:
    """What the GPU run does on CUDA, where buckets are on by default: the twin shares the weights."""
    from koe.engine.torch import TorchOptions

    options = TorchOptions(device="cpu", max_batch=4, threads=2, buckets=True)
    bucketed = torch_speech.with_engine(torch_speech.engine.sharing(options))  # type: ignore[attr-defined]
    assert _without_buckets(torch_speech) is None
    twin = _without_buckets(bucketed)
    assert twin is not None and twin.engine.buckets is None  # type: ignore[attr-defined]
    assert twin.engine._model is bucketed.engine._model  # type: ignore[attr-defined]
    shapes = _shapes(bucketed)
    assert shapes["buckets"]["rows"] == (1, 2, 4) and shapes["buckets"]["frames"][-1] == 51_200
    assert (shapes["warmed"], shapes["graph_shapes"]) == (0, [])
