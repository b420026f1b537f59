"""The cold-start measurement's pieces that need no model: the children it starts, the step timer, the
ratios and the table (the measurement itself is ``python -m koe_bench.coldstart`` and ``koe bench``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from koe.errors import ConfigError
from koe_bench import firstrequest
from koe_bench.children import Koe
from koe_bench.coldstart import TARGET_RATIO, ColdRun, _StepTimer, run, summarize_cold, table, targets
from koe_bench.firstrequest import FirstRequest


def test_a_baseline_tree_runs_with_its_own_source_and_says_so_in_its_kind() -> None:
    mine, baseline = Koe(), Koe(Path("/old/src"), without_torch=True)
    assert mine.command()[-2:] == ["-m", "koe.cli"] and mine.kind("koe_say") == "koe_say"
    assert baseline.env()["PYTHONPATH"] == "/old/src"
    assert baseline.kind("koe_say") == "baseline_koe_say_without_torch"
    assert "sys.modules['torch'] = None" in baseline.command()[-1]


def test_a_first_start_runs_each_child_in_a_cache_of_its_own_holding_what_install_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "installed"
    for kept in ("voices", "stage-cut", "calibration", "optimized", "g2p", "measured"):
        (installed / kept).mkdir(parents=True)
    (installed / "stage-cut" / "verdict.json").write_text("{}")
    monkeypatch.setenv("KOE_CACHE_DIR", str(installed))
    first = Koe(without_torch=True, first_start_in=tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    one, other = Path(first.env()["KOE_CACHE_DIR"]), Path(first.env()["KOE_CACHE_DIR"])
    assert one != other and one.parent == tmp_path / "runs"
    # all but what was measured on this CPU
    assert sorted(path.name for path in one.iterdir()) == [
        "calibration",
        "g2p",
        "optimized",
        "stage-cut",
        "voices",
    ]
    assert (one / "voices").is_symlink() and (one / "stage-cut" / "verdict.json").read_text() == "{}"
    assert first.kind("koe_serve_ready") == "koe_serve_ready_first_start_without_torch"
    # the baseline's image held the same
    baseline = Koe(src=tmp_path, without_torch=True, first_start_in=tmp_path / "runs")
    assert sorted(path.name for path in Path(baseline.env()["KOE_CACHE_DIR"]).iterdir()) == sorted(
        path.name for path in one.iterdir()
    )


def test_a_baseline_that_is_no_koe_source_tree_is_refused_before_any_process_runs(tmp_path: Path) -> None:
    (tmp_path / "koe").mkdir()  # a folder named koe without koe's CLI: the step profile could not run it
    with pytest.raises(ConfigError, match=r"koe/cli\.py"):
        run(1, baseline=tmp_path)


def _runs(kind: str, *walls: float) -> list[ColdRun]:
    return [ColdRun(kind, wall, 500.0 + wall) for wall in walls]


def test_medians_and_ratios_to_kokoro_onnx() -> None:
    summary = summarize_cold(
        {
            "kokoro_onnx_say": _runs("kokoro_onnx_say", 2.0, 1.0, 3.0),
            "koe_say": _runs("koe_say", 3.0, 9.0, 2.0),
            "koe_serve_ready": _runs("koe_serve_ready", 4.0, 4.0, 5.0),
        }
    )
    assert summary["kinds"]["koe_say"]["wall_s"] == 3.0
    assert summary["ratios"] == {"koe_say_over_kokoro_onnx": 1.5, "koe_serve_ready_over_kokoro_onnx": 2.0}
    met = targets({**summary, "repeats": 3})
    assert met["cold_koe_say_over_kokoro_onnx"] == {"target": TARGET_RATIO, "measured": 1.5, "met": True}
    assert not met["cold_koe_serve_ready_over_kokoro_onnx"]["met"]
    title, columns, rows, _notes = table({**summary, "repeats": 3})
    assert "cold start" in title and len(rows) == 3 and all(len(row) == len(columns) for row in rows)
    assert rows[1] == ("koe_say", "3.00", "1.50", "503")


class _Loader:
    calls = 0

    @classmethod
    def load(cls, n: int) -> int:
        cls.calls += n
        return n


def test_the_step_timer_wraps_functions_and_classmethods_and_skips_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("koe_fake_steps")
    module.build = lambda n: n * 2  # type: ignore[attr-defined]
    module.Loader = _Loader  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "koe_fake_steps", module)
    monkeypatch.setattr(_Loader, "load", _Loader.__dict__["load"])  # restored after the test
    timer = _StepTimer()
    assert timer.wrap("koe_fake_steps:build") and timer.wrap("koe_fake_steps:Loader.load")
    assert not timer.wrap("koe_fake_steps:gone") and not timer.wrap("no_such_module_here:x")
    assert module.build(2) == 4 and _Loader.load(3) == 3  # type: ignore[attr-defined]
    assert [call["step"] for call in timer.calls] == ["koe_fake_steps:build", "koe_fake_steps:Loader.load"]
    assert all(call["wall_s"] >= 0 and call["thread"] == "MainThread" for call in timer.calls)


def test_the_first_requests_summary_takes_medians_and_counts_every_gap() -> None:
    kind = "koe_serve_request_3s_after_ready_first_start_without_torch"
    runs = [
        FirstRequest(kind, 2.0, 0.5, 0, 0.0),
        FirstRequest(kind, 3.0, 1.7, 2, 0.12),
        FirstRequest(kind, 2.5, 0.6, 1, 0.05),
    ]
    summary = firstrequest.summarize({kind: runs})[kind]
    assert (summary["ready_s"], summary["first_speech_s"]) == (2.5, 0.6)
    assert (summary["gap_count"], summary["max_gap_s"]) == (3, 0.12) and len(summary["runs"]) == 3


def test_the_first_request_is_asked_of_this_koe_and_the_baseline_at_ready_and_while_measuring(
    tmp_path: Path,
) -> None:
    variants = list(firstrequest._variants(tmp_path, Path("/old/src")))
    assert [(koe.src, after_s) for koe, after_s in variants] == [
        (None, firstrequest.AT_READY_S), (None, firstrequest.LATER_S),
        (Path("/old/src"), firstrequest.AT_READY_S), (Path("/old/src"), firstrequest.LATER_S),
    ]  # fmt: skip
    assert all(koe.first_start_in == tmp_path and koe.without_torch for koe, _ in variants)
