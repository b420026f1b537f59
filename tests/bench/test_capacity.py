"""The capacity ladder's logic on the scripted fake engine: a real server, real koe clients; its figures from
hand-made traces; its busy neighbours as real processes."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from koe.agent.replay import ReplayPace
from koe.app import create_app
from koe.machine import usable_cores
from koe.scheduler.capacity import AudioPerCpu
from koe.scheduler.cost import SegmentCost
from koe.settings import Settings
from koe_bench import capacity, report
from koe_bench.config import BenchConfig
from koe_bench.stats import Chunk
from koe_bench.turns import TurnTrace
from koe_bench.usage import Spent
from live_server import LOOPBACK, ServerFactory, run_server
from support.fake import fake_speech

#: A short answer streamed fast: each level takes a second or two on the fake engine.
ANSWER = "Sure, here it is. The fake engine speaks every word of this answer in order."
PACE = ReplayPace(tokens_per_s=200.0, first_token_delay_s=0.02)


def _config(tmp_path: Path, **overrides: object) -> BenchConfig:
    config = BenchConfig(tmp_path, answer=ANSWER, pace=PACE, max_sessions=2, capacity_rounds=1)
    return replace(config, **overrides)


def test_the_ladder_climbs_while_levels_pass_and_reports_each(
    serve_fake: ServerFactory, tmp_path: Path
) -> None:
    done: list[int] = []
    with serve_fake() as server:
        result = asyncio.run(capacity.ladder(server.http_url, _config(tmp_path), lambda: done.append(1)))
    assert [level["sessions"] for level in result["levels"]] == [1, 2]
    assert all(level["ok"] and level["rounds"] == 1 for level in result["levels"])
    assert result["max_sessions_ok"] == 2 and not result["stopped_early"]
    assert len(done) == 2  # the progress callback, once a level
    for level in result["levels"]:
        assert level["gaps_per_listener"]["n"] == level["silence_per_listener_s"]["n"] == level["sessions"]
        usage = level["usage"]  # the server runs in this process: what the level cost it is known
        assert 0 < usage["client_cpu_s"] < usage["cpu_s"] and usage["audio_per_cpu_s"] > 0
        assert usage["rss_peak_mb"] > 0 and usage["rss_peak_over_start"] > 0
    assert result["hog"] == 0 and result["usable_cores"] == usable_cores()
    assert result["listener_hour"]["listeners_per_core"] == 2 / usable_cores()
    table = report.capacity_section(result)
    assert [row[0] for row in table.rows] == ["1", "2"]
    assert [row[2].split()[1] for row in table.rows] == ["(max)", "(max)"]  # 1 and 2 listeners: no p95
    assert table.notes[0] == "largest smooth load: 2 sessions"
    assert table.notes[1].startswith(f"{2 / usable_cores():.2f} listeners per core")


def test_the_ladder_stops_at_the_first_level_that_fails(serve_fake: ServerFactory, tmp_path: Path) -> None:
    with serve_fake() as server:
        # no first audio comes within a nanosecond of the first sentence: level 1 fails, 2 is not tried
        result = asyncio.run(capacity.ladder(server.http_url, _config(tmp_path, ttfa_threshold_s=1e-9)))
    assert [level["sessions"] for level in result["levels"]] == [1]
    assert result["max_sessions_ok"] is None and result["stopped_early"]
    assert result["listener_hour"] is None
    assert report.capacity_section(result).notes[0] == "no level tried was smooth and prompt"


def test_a_level_whose_listener_is_refused_does_not_pass_and_counts_the_refusal_by_code() -> None:
    settings = Settings(host=LOOPBACK, port=0, workers=1, threads_per_worker=1, segment_cache_mb=0)
    with run_server(create_app(settings, fake_speech(), cost=SegmentCost()), settings) as server:
        # one core making half an audio-second per CPU-second (a clock that stands still keeps the figure)
        slow = AudioPerCpu(lambda: 0.0, value=0.5)
        server.call(lambda: setattr(server.runtime.capacity, "meter", slow))
        level, traces = asyncio.run(
            capacity.run_level(server.http_url, 2, ANSWER, PACE, "af_heart", threshold_s=10.0)
        )
    assert level.refused == {"over_capacity": 1}
    assert len(traces) == 1 and level.gap_count == 0  # the admitted listener was heard, smoothly
    assert level.rounds_ok == 1 and not level.ok  # its round passed, yet a refusal fails the level


def _trace(first_sentence_at: float, *chunks: tuple[float, float]) -> TurnTrace:
    """A listener's turn: the first sentence complete at ``first_sentence_at``, ``(at, seconds)`` of audio."""
    return TurnTrace("koe", first_sentence_at=first_sentence_at, chunks=[Chunk(*c) for c in chunks])


def test_gaps_and_silence_are_counted_per_listener_as_well_as_in_total() -> None:
    smooth = _trace(0.6, (1.0, 0.5), (1.5, 0.5))
    gappy = _trace(0.6, (1.2, 0.5), (2.2, 0.5))  # the speaker runs dry at 1.7 and waits 0.5 s
    level = capacity.summarize_level(2, [smooth, gappy], None, wall_s=4.0, rounds=1, rounds_ok=0)
    assert (level.gap_count, level.gap_total_s, level.max_gap_s) == (
        1,
        pytest.approx(0.5),
        pytest.approx(0.5),
    )
    assert (level.gaps_per_listener.median, level.gaps_per_listener.max) == (0.5, 1)
    silence = level.silence_per_listener_s
    assert (silence.median, silence.max) == (pytest.approx(0.25), pytest.approx(0.5))
    assert level.audio_s == 2.0 and level.audio_per_wall_s == 0.5
    assert (level.first_audio_after_sentence_worst_s, level.worst_is) == (pytest.approx(0.6), "max")


def test_the_worst_first_audio_is_the_p95_once_there_are_twenty_listeners() -> None:
    traces = [_trace(0.0, (0.1 * (i + 1), 1.0)) for i in range(20)]  # first audio 0.1 … 2.0 s
    level = capacity.summarize_level(20, traces, None, wall_s=3.0, rounds=1, rounds_ok=1)
    assert level.worst_is == "p95"
    assert level.first_audio_after_sentence_worst_s == level.first_audio_after_sentence_s.p95
    assert level.first_audio_after_sentence_worst_s < level.first_audio_after_sentence_s.max


def test_audio_per_cpu_second_counts_the_server_share_and_the_peak_is_set_against_the_start() -> None:
    level = capacity.summarize_level(1, [_trace(0.0, (0.5, 5.0))], None, wall_s=6.0, rounds=1, rounds_ok=1)
    usage = capacity.level_usage(level, Spent(cpu_s=3.0, thread_cpu_s=1.0, peak_rss_mb=660.0), 600.0)
    assert usage.audio_per_cpu_s == 2.5  # 5 s of audio over 3 − 1 CPU-seconds of the server
    assert usage.rss_peak_over_start == pytest.approx(1.1)
    only_clients = capacity.level_usage(level, Spent(1.0, 1.0, None), 600.0)
    assert only_clients.audio_per_cpu_s is None and only_clients.rss_peak_over_start is None


def test_a_listener_hour_costs_the_cores_shared_by_the_listeners_and_the_cpu_its_audio_takes() -> None:
    cost = capacity.listener_hour(cores=2, listeners=4, audio_per_cpu_s=2.5, vcpu_price_usd=0.0446)
    assert cost.listeners_per_core == 2.0
    assert (cost.provisioned_vcpu_h, cost.provisioned_usd) == (0.5, pytest.approx(0.0223))
    assert (cost.used_vcpu_h, cost.used_usd) == (0.4, pytest.approx(0.01784))
    elsewhere = capacity.listener_hour(2, 1, None, 0.0446)  # a server elsewhere: its CPU is not known
    assert (elsewhere.provisioned_usd, elsewhere.used_usd) == (pytest.approx(0.0892), None)
    with pytest.raises(ValueError, match="listeners >= 1"):
        capacity.listener_hour(2, 0, 2.5, 0.0446)


def _busy_children() -> dict[int, str]:
    """This process's children running the busy loop, and the state of each (``R``: running)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):  # not a process, or one that ended while read
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == os.getpid() and b"while True: pass" in command:
            found[int(entry.name)] = state
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="the processes are found in Linux's /proc")
def test_busy_neighbours_run_through_the_whole_ladder_and_are_gone_after_it(
    serve_fake: ServerFactory, tmp_path: Path
) -> None:
    seen: list[dict[int, str]] = []
    config = _config(tmp_path, hog=2, max_sessions=1)
    with serve_fake() as server:
        result = asyncio.run(capacity.ladder(server.http_url, config, lambda: seen.append(_busy_children())))
    (during,) = seen  # read as the one level ended
    assert len(during) == 2 and set(during.values()) == {"R"}  # both spinning
    assert not any(Path(f"/proc/{pid}").exists() for pid in during)  # stopped and reaped
    assert result["hog"] == 2
    assert report.capacity_section(result).title.endswith("2 busy neighbour processes)")


def test_the_report_names_how_its_server_decodes_as_the_environment_set_it() -> None:
    """The ladder's peak memory depends on how segments are decoded, which ``KOE_*`` variables change: the
    report says what its server ran with."""
    bounded = capacity.server_fields(Settings.from_env({"KOE_WHOLE_DECODE_MAX_S": "2"}, port=0))
    default = capacity.server_fields(Settings.from_env({}, port=0))
    assert (bounded["whole_decode_max_s"], default["whole_decode_max_s"]) == (2.0, None)
    assert default["windowed_first"] and not default["windowed"]
    assert default["workers"] >= 2
