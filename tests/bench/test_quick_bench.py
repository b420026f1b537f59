"""``koe bench --quick`` end to end: real server, real clients, real audio; its outputs are well formed.

No assertion on speed (numbers on a shared CI machine mean nothing); only on what the run must produce.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koe.cli import main
from koe_bench.capacity import levels

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_capacity_levels_step_by_one_up_to_four_then_double_up_to_the_maximum() -> None:
    assert levels(1) == [1]
    assert levels(3) == [1, 2, 3]
    assert levels(8) == [1, 2, 3, 4, 8]
    assert levels(6) == [1, 2, 3, 4, 6]
    assert levels(20) == [1, 2, 3, 4, 8, 16, 20]


def _summary_ok(summary: dict[str, object], n: int) -> None:
    assert summary["n"] == n
    assert isinstance(summary["median"], float | int) and summary["median"] >= 0
    assert summary["p95"] is None  # fewer than 20 samples


@pytest.mark.bench_smoke
@pytest.mark.model
@pytest.mark.server
@pytest.mark.slow
def test_quick_bench_writes_a_complete_report_and_plots(tmp_path: Path) -> None:
    assert main(["bench", "--quick", "--out", str(tmp_path)]) == 0

    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["schema"] == "koe-bench/2"
    assert report["quick"] is True and report["target"]["in_process"] is True
    scenarios = report["scenarios"]

    agent = scenarios["agent"]["strategies"]
    assert set(agent) == {"batch", "aws_sample", "koe", "koe_windowed"}
    for row in agent.values():
        for key in ("first_audio_s", "first_audio_after_sentence_s", "total_s", "gap_count", "gap_total_s"):
            _summary_ok(row[key], 1)
        assert row["first_audio_s"]["median"] <= row["total_s"]["median"]
    # every strategy spoke the same answer: about the same length of audio
    lengths = [row["audio_s"]["median"] for row in agent.values()]
    assert max(lengths) < 1.2 * min(lengths)
    assert scenarios["agent"]["ratios"]["batch_over_koe_first_audio"] > 0
    assert scenarios["agent"]["ratios"]["koe_over_koe_windowed_first_audio"] > 0
    # batch hands over one file after the whole answer: nothing can play before the text is complete
    timelines = scenarios["agent"]["timelines"]
    assert timelines["batch"]["audio"][0][0] >= timelines["batch"]["tokens"][-1]
    assert len(timelines["koe"]["segments"]) >= 2

    languages = scenarios["languages"]
    assert set(languages) == {"en-us", "ja", "es"}
    for entry in languages.values():
        koe, batch = entry["strategies"]["koe"], entry["strategies"]["batch"]
        assert 0 < koe["first_audio_s"]["median"] and koe["audio_s"]["median"] > 0.5
        assert batch["audio_s"]["median"] > 0.5 and entry["audio_s_per_char"] > 0

    peer = scenarios["peer"]["strategies"]
    assert set(peer) == {"kokoro_onnx_create", "kokoro_onnx_create_stream", "koe_whole_text"}
    assert all(row["audio_s"]["median"] > 1.0 for row in peer.values())

    barge_in = scenarios["barge_in"]
    assert len(barge_in["runs"]) == 2
    assert barge_in["audio_after_cancelled"] == 0  # the protocol's promise, not a timing
    _summary_ok(barge_in["cancel_to_cancelled_s"], 2)
    _summary_ok(barge_in["unplayed_at_cancel_s"], 2)  # what the client's player must drop at the cancel

    capacity = scenarios["capacity"]
    assert [level["sessions"] for level in capacity["levels"]] in ([1], [1, 2])
    assert all(level["rtf"] > 0 for level in capacity["levels"])
    assert capacity["rounds"] == 1 and all(level["rounds"] == 1 for level in capacity["levels"])
    assert all(level["ok"] == (level["rounds_ok"] == 1) for level in capacity["levels"])

    reading = scenarios["reading"]
    assert reading["overall"]["texts"] == 2 and len(reading["results"]) == 2
    assert [r["group"] for r in reading["results"]] == list(reading["groups"])  # one text per group
    assert all(r["transcript"] for r in reading["results"])  # speech came back and was transcribed
    assert reading["overall"]["passed"] == sum(r["passed"] for r in reading["results"])

    engines = scenarios["engine"]["engines"]
    assert set(engines) == {"koe", "kokoro-onnx"}
    for fit in engines.values():
        assert fit["slope_ms_per_token"] > 0
        assert [p["tokens"] for p in fit["points"]] == sorted(p["tokens"] for p in fit["points"])
    cpu = scenarios["engine"]["cpu"]
    assert cpu["words"] == 40 and set(cpu["engines"]) == {"koe", "kokoro-onnx"}
    assert all(cost["cpu_s"] > 0 and cost["audio_per_cpu_s"] > 0 for cost in cpu["engines"].values())

    openers = scenarios["openers"]
    assert set(openers["kinds"]) == {"koe_cached", "koe_uncached"}
    for row in openers["kinds"].values():
        _summary_ok(row["first_audio_after_opener_s"], row["turns"])
    # every cached turn's opener was pre-warmed, none of the sentences after them were
    assert openers["cache"]["hits"] == openers["kinds"]["koe_cached"]["turns"] == len(openers["openers"])
    assert "cold_start" not in scenarios  # a quick run starts no fresh processes

    assert set(report["targets"]) == {
        "first_audio_speedup_vs_batch",
        "gaps_one_session",
        "cancel_to_silence_s",
        "reading_pass_rate",
        "reading_worst_group_pass_rate",
    }
    for name in report["plots"].values():
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)
    tables = (tmp_path / "bench.md").read_text()
    assert "| koe |" in tables and "| koe_windowed |" in tables and "| kokoro_onnx_create_stream |" in tables
    assert "| koe_cached |" in tables
    assert "| overall |" in tables
