"""This machine's costs: timed once and kept, and at a first start measured after the server is ready, as
the scheduler's last job while it is idle, and again when a live job ran beside a part (the fake engine
stands in for the model; a real scheduler runs the parts on real threads)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from concurrent.futures import Future
from pathlib import Path

import httpx
import pytest

from koe.app import create_app
from koe.engine.base import SynthesisRequest
from koe.engine.onnx.engine import OnnxEngine
from koe.machine import Measured
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.server import measurement
from koe.server.measurement import ATTEMPTS, TIMED, TIMING, CostMeasurement
from koe.server.warmup import PROOF
from koe.settings import Settings
from koe.types import StyleTable
from live_checks import metric, wait_for
from live_server import LOOPBACK, run_server
from support.fake import FakeEngine, FakeG2P, fake_speech
from ws_events import WAIT_S

KEY = {"what": "segment costs", "speech": "fake"}
_WAIT_S = 5.0  # a thread hand-off on a loaded machine; never reached when correct


class _Preparing(FakeEngine):
    """Records its preparation among the decodes, in order; ``alone`` says what each preparation returns;
    ``entered`` is set once a decode has begun."""

    def __init__(self, *alone: bool, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.alone = list(alone)
        self.entered = threading.Event()

    def work(self, request: SynthesisRequest, cancel: threading.Event | None = None) -> bool:
        self.entered.set()
        return super().work(request, cancel)

    def prepare(self, style: StyleTable, cancel: threading.Event | None = None) -> bool:
        self.worked.append("prepare")
        return self.alone.pop(0) if self.alone else True


def _phonemes(text: str) -> str:
    return FakeG2P("en-us").phonemize(text)


def _fitted(cost: SegmentCost) -> tuple[float, float, float]:
    return cost.synthesis.fixed_s, cost.synthesis.per_unit_s, cost.chars_per_s


def _measurement(
    engine: FakeEngine, measured: Measured | None = None, windowed: bool = True
) -> CostMeasurement:
    return CostMeasurement(fake_speech(engine), "af_heart", windowed, measured)


def test_now_times_both_utterances_then_prepares_the_engine_on_their_decodes_and_keeps_the_timings(
    tmp_path: Path,
) -> None:
    engine = _Preparing(delay_s=0.01)
    measured = Measured(tmp_path, KEY)
    _measurement(engine, measured).now()
    kept = measured.read()
    assert engine.worked == [_phonemes(PROOF), _phonemes(TIMING), "prepare"]
    assert kept is not None and [sample[0] for sample in kept["samples"]] == [len(PROOF), len(TIMING)]


def test_an_unwindowed_server_does_not_prepare_the_engine() -> None:
    engine = _Preparing()
    _measurement(engine, windowed=False).now()
    assert "prepare" not in engine.worked


def test_a_later_start_fits_the_kept_timings_and_decodes_nothing(tmp_path: Path) -> None:
    first = _measurement(FakeEngine(delay_s=0.01), Measured(tmp_path, KEY)).now()
    engine = FakeEngine(delay_s=0.2)  # a slower engine now: its speed does not enter the fit
    later = _measurement(engine, Measured(tmp_path, KEY)).kept()
    assert engine.calls == 0
    assert later is not None and _fitted(later) == _fitted(first)


def test_kept_timings_of_other_utterances_or_damaged_ones_are_not_used(tmp_path: Path) -> None:
    measured = Measured(tmp_path, KEY)
    for kept in (
        {"samples": [[len(TIMING), 1.0, 0.5], [len(PROOF), 1.0, 0.5]]},
        {"samples": [[len(PROOF), 1.0, 0.5], [1, "x", None]]},
        {"samples": [[len(PROOF), 1.0, 0.5]]},
        {"samples": [[len(PROOF), 1.0, 0.5], [len(TIMING), float("nan"), 0.5]]},
    ):
        measured.write(kept)
        assert _measurement(FakeEngine(), measured).kept() is None


def test_without_a_record_nothing_is_kept_and_every_start_times_both() -> None:
    for _ in range(2):
        engine = FakeEngine()
        measurement_ = _measurement(engine, None, windowed=False)
        assert measurement_.kept() is None
        measurement_.now()
        assert engine.calls == len(TIMED)


@pytest.fixture(autouse=True)
def _short_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measurement, "QUIET_S", 0.02)  # the production quiet time, shortened


def _run_when_idle(
    engine: _Preparing, cost: SegmentCost, measured: Measured | None, live: bool = False
) -> bool:
    """``when_idle`` on a real scheduler of two workers; with ``live``, a live job comes while the first
    timed utterance is held, which stops that part's decode at once (the fake engine, like the real one,
    ends a run when its Cancel is set) and runs before the held decode could have ended."""

    async def main() -> bool:
        scheduler = Scheduler(workers=2, max_queued=10)
        measuring = asyncio.create_task(
            _measurement(engine, measured).when_idle(scheduler, cost, lambda: True, time_utterances=True)
        )
        if live:
            assert engine.gate is not None
            assert await asyncio.to_thread(engine.entered.wait, _WAIT_S)  # the first utterance is held
            job = scheduler.submit(lambda: "a live turn's segment", deadline=0.0, cost_s=0.1)
            async with asyncio.timeout(_WAIT_S):  # it stops the part at once: the part's gate stays shut
                assert await job == "a live turn's segment"
            assert engine.stopped == 1
            engine.gate.set()
        async with asyncio.timeout(30):
            outcome = await measuring
        await scheduler.aclose(_WAIT_S)
        return outcome

    return asyncio.run(main())


def test_when_idle_times_the_utterances_as_the_last_jobs_adopts_their_fit_and_keeps_it(
    tmp_path: Path,
) -> None:
    engine = _Preparing(delay_s=0.01)
    cost = SegmentCost()
    measured = Measured(tmp_path, KEY)
    assert _run_when_idle(engine, cost, measured)
    assert engine.worked == [_phonemes(PROOF), _phonemes(TIMING), "prepare"]
    kept = _measurement(FakeEngine(), measured).kept()
    assert kept is not None and _fitted(cost) == _fitted(kept) != _fitted(SegmentCost())


def test_a_live_job_that_comes_while_a_part_runs_stops_it_and_the_part_is_measured_again_when_idle(
    tmp_path: Path,
) -> None:
    engine = _Preparing(gate=threading.Event())
    cost = SegmentCost()
    measured = Measured(tmp_path, KEY)
    assert _run_when_idle(engine, cost, measured, live=True)
    assert engine.worked == [_phonemes(PROOF), _phonemes(PROOF), _phonemes(TIMING), "prepare"]
    kept = _measurement(FakeEngine(), measured).kept()
    assert kept is not None and _fitted(cost) == _fitted(kept)  # the stopped part's timing was not used


def test_cancelling_the_measurement_stops_the_part_running(tmp_path: Path) -> None:
    engine = _Preparing(gate=threading.Event())  # the gate never opens: only a Cancel ends the decode

    async def main() -> None:
        scheduler = Scheduler(workers=1, max_queued=10)
        measuring = asyncio.create_task(
            _measurement(engine).when_idle(scheduler, SegmentCost(), lambda: True, time_utterances=True)
        )
        assert await asyncio.to_thread(engine.entered.wait, _WAIT_S)
        measuring.cancel()  # as the server's shutdown does
        await asyncio.gather(measuring, return_exceptions=True)
        await scheduler.aclose(_WAIT_S)

    asyncio.run(main())
    assert engine.stopped == 1 and engine.worked == [_phonemes(PROOF)]


def test_an_engine_that_never_measures_alone_is_asked_again_then_left_with_provisional_step_costs() -> None:
    engine = _Preparing(*([False] * ATTEMPTS))
    cost = SegmentCost()
    assert not _run_when_idle(engine, cost, None)
    assert engine.worked.count("prepare") == ATTEMPTS
    assert engine.worked.count(_phonemes(TIMING)) == 1  # the utterances are timed once
    assert _fitted(cost) != _fitted(SegmentCost())


def test_a_kept_fit_is_not_timed_again_after_readiness() -> None:
    engine = _Preparing()

    async def main() -> bool:
        scheduler = Scheduler(workers=1, max_queued=10)
        speech = Speech(engine, fake_speech().voices, {"en-us": FakeG2P("en-us")})
        done = await CostMeasurement(speech, "af_heart", True, None).when_idle(
            scheduler, SegmentCost(), lambda: True, time_utterances=False
        )
        await scheduler.aclose(_WAIT_S)
        return done

    assert asyncio.run(main())
    assert engine.worked == ["prepare"]


def test_nothing_is_measured_while_a_session_or_request_is_open_even_on_a_quiet_scheduler() -> None:
    engine = _Preparing()
    open_sessions = [1]

    async def main() -> bool:
        scheduler = Scheduler(workers=1, max_queued=10)
        measuring = asyncio.create_task(
            _measurement(engine).when_idle(
                scheduler, SegmentCost(), lambda: not open_sessions, time_utterances=True
            )
        )
        await asyncio.sleep(10 * measurement.QUIET_S)
        assert engine.worked == []  # quiet all along, but a session is open
        open_sessions.clear()
        async with asyncio.timeout(30):
            done = await measuring
        await scheduler.aclose(_WAIT_S)
        return done

    assert asyncio.run(main())
    assert engine.worked == [_phonemes(PROOF), _phonemes(TIMING), "prepare"]


def test_a_real_first_start_measures_after_ready_and_a_request_mid_part_stops_it_and_is_answered(
    speech: Speech, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The shared model handed in as a load (as ``koe serve`` hands in its own), with nothing measured kept:
    ready at once, then timing its sentences; a request sent while a timed part's engine run is in
    progress stops that part, is answered, and the costs are measured after all."""
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    loading: Future[Speech] = Future()
    loading.set_result(speech)
    settings = Settings(host=LOOPBACK, port=0, segment_cache_mb=0)
    assert isinstance(speech.engine, OnnxEngine) and speech.engine.streaming is not None
    stages = speech.engine.streaming.stages
    with caplog.at_level(logging.INFO, logger="koe.server.measurement"):
        with run_server(create_app(settings, loading=loading), settings) as live:
            assert metric(live, "koe_costs_measured") == 0
            wait_for(lambda: stages.runs()[1] > 0, "a timed part's engine run, with no request open")
            body = {"text": "Hello, this is a request.", "format": "pcm"}
            answer = httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S)
            assert answer.status_code == 200 and len(answer.content) > 24_000  # over half a second of speech
            wait_for(lambda: metric(live, "koe_costs_measured") == 1, "the costs, measured", timeout_s=120)
    assert any("gave way" in record.getMessage() for record in caplog.records)
    kept = [json.loads(path.read_text()) for path in (tmp_path / "measured").glob("*.json")]
    assert [
        len(record["values"]["samples"]) for record in kept if record["key"]["what"] == "segment costs"
    ] == [2]
