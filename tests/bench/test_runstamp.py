"""The head and end every scenario's own result file shares, so that its JSON keeps one shape."""

from __future__ import annotations

import time

from koe.agent.replay import ReplayPace
from koe_bench.runstamp import pace_fields, report_head, run_head, stamp_end


def test_a_result_file_starts_with_its_schema_command_stamp_and_config_in_that_order() -> None:
    head = report_head("koe-bench-x/1", "koe bench --only x", {"voice": "af_heart"})
    assert list(head) == ["schema", "command", "started_at", "machine", "config"]
    assert head["schema"] == "koe-bench-x/1" and head["command"] == "koe bench --only x"
    assert head["config"] == {"voice": "af_heart"}
    assert list(head["machine"]) == list(run_head()["machine"])


def test_quick_is_recorded_before_the_stamp_only_by_a_scenario_that_has_a_quick_form() -> None:
    for quick in (True, False):
        head = report_head("s", "c", {}, quick=quick)
        assert list(head) == ["schema", "command", "quick", "started_at", "machine", "config"]
        assert head["quick"] is quick


def test_the_pace_is_recorded_as_the_replay_takes_it() -> None:
    pace = ReplayPace(tokens_per_s=25.0, first_token_delay_s=0.4)
    assert pace_fields(pace) == {"tokens_per_s": 25.0, "first_token_delay_s": 0.4}
    assert ReplayPace(**pace_fields(pace)) == pace


def test_the_end_adds_the_final_load_and_the_elapsed_time() -> None:
    report = report_head("s", "c", {})
    started = time.monotonic() - 2.0
    stamp_end(report, started)
    assert list(report) == ["schema", "command", "started_at", "machine", "config", "elapsed_s"]
    assert list(report["machine"]) == [*run_head()["machine"], "load_avg_1m_end"]
    assert report["elapsed_s"] >= 2.0
