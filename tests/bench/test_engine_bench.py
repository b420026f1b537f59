"""The engine scenario's CPU measure: every thread's CPU of a run, its spin-down included, and waiting costs
nothing; candidates are compared round-robin on audio-seconds per CPU-second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from koe.types import SAMPLE_RATE
from koe_bench.engine import SETTLE_S, cpu_cost, timed
from koe_bench.report import _engine_cpu

ONE_SECOND = np.zeros(SAMPLE_RATE, dtype=np.float32)


def _burn(seconds: float) -> None:
    """Keep this thread on a core for ``seconds`` of its own CPU time."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_a_run_costs_the_cpu_of_every_thread_including_work_left_running_after_it_returns() -> None:
    burn_s = SETTLE_S / 2

    def returns_at_once_leaving_a_thread_busy(_phonemes: str) -> np.ndarray:
        threading.Thread(target=_burn, args=(burn_s,)).start()
        return ONE_SECOND

    sample, audio = timed(returns_at_once_leaving_a_thread_busy, "x")
    assert audio is ONE_SECOND
    assert sample.cpu_s >= burn_s * 0.9
    assert sample.wall_s < burn_s


def test_a_run_that_waits_costs_wall_time_but_no_cpu() -> None:
    wait_s = 0.1

    def waits(_phonemes: str) -> np.ndarray:
        time.sleep(wait_s)
        return ONE_SECOND

    sample, _audio = timed(waits, "x")
    assert sample.wall_s >= wait_s
    assert sample.cpu_s < wait_s / 2


def test_candidates_run_round_robin_and_the_cheaper_makes_more_audio_per_cpu_second() -> None:
    calls: list[str] = []

    def burning(name: str, seconds: float) -> Callable[[str], np.ndarray]:
        def synthesize(_phonemes: str) -> np.ndarray:
            calls.append(name)
            _burn(seconds)
            return ONE_SECOND

        return synthesize

    costs = cpu_cost({"cheap": burning("cheap", 0.02), "dear": burning("dear", 0.06)}, "x", repeats=2)

    assert calls == ["cheap", "dear"] * 3  # a warm-up each, then two rounds
    assert costs["cheap"].runs == costs["dear"].runs == 2
    assert costs["cheap"].audio_s == costs["dear"].audio_s == 1.0
    assert costs["cheap"].cpu_s >= 0.02 and costs["dear"].cpu_s >= 0.06
    assert costs["cheap"].audio_per_cpu_s == 1.0 / costs["cheap"].cpu_s
    assert costs["cheap"].audio_per_cpu_s > 1.5 * costs["dear"].audio_per_cpu_s


def test_the_report_has_a_row_per_engine_with_its_audio_seconds_per_cpu_second() -> None:
    cost = {"audio_s": 14.0, "wall_s": 3.6, "cpu_s": 6.3, "audio_per_cpu_s": 14.0 / 6.3, "runs": 3}
    cpu = {
        "words": 40,
        "tokens": 231,
        "engines": {"koe": cost, "kokoro-onnx": {**cost, "cpu_s": 7.0, "audio_per_cpu_s": 2.0}},
    }

    section = _engine_cpu(cpu)

    assert "40-word" in section.title and "231 tokens" in section.title
    assert section.rows == [
        ("koe", "14.00", "6.30", "3.60", "2.22"),
        ("kokoro-onnx", "14.00", "7.00", "3.60", "2.00"),
    ]
