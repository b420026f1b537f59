"""A long decode leaves no memory behind: ONNX Runtime's CPU arena hands back what a run held once the run
ends (koe.engine.onnx.sessions.releasing), so a process's RSS follows the segment in progress, not the
longest one it ever decoded; and long whole decodes on two workers at once do not add up
(koe.engine.onnx.budget)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from koe.engine.assets import packaged_model_bytes
from koe.engine.base import Cancel, SynthesisRequest
from koe.engine.onnx.budget import WHOLE_FRAMES_AT_ONCE
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.sessions import ARENA_SHRINKAGE, RELEASING
from koe.engine.onnx.stages import stoppable
from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.pipeline.speech import Speech

#: 9 s of audio, one utterance decoded whole: 158 MB stayed resident after it without the release, 4 MB with
#: it (a one-off, 2026-12-03, this 2-core machine).
_LONG = (
    "The quarterly report shows steady growth across every region, with new customers in the north and "
    "stronger renewals in the south, as the team expected."
)
#: What one decode may leave in RSS: its audio, Python's own allocations, allocator slack.
_LEFT_MB = 80.0
_PAGE = os.sysconf("SC_PAGE_SIZE")
#: A second long sentence (~10 s), decoded beside ``_LONG``.
_OTHER = (
    "After the storm passed, the volunteers walked along the river and counted every fallen tree, then they "
    "wrote a careful list for the city council to read on Monday."
)
#: Two decodes side by side may raise the peak this much above one decode's: both whole at once doubled it
#: (1.8 to 2.3 times one decode's rise in one-offs, 2026-12-03, this 2-core machine).
_BESIDE_FACTOR = 1.5
_SAMPLE_S = 0.005


def _rss_mb() -> float:
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * _PAGE / 2**20


@pytest.mark.parametrize("cancel", [None, threading.Event(), Cancel()], ids=["none", "event", "cancel"])
def test_every_run_releases_the_cpu_arena_whatever_cancels_it(cancel: threading.Event | None) -> None:
    assert stoppable(cancel).get_run_config_entry(ARENA_SHRINKAGE) == "cpu:0"
    assert RELEASING.get_run_config_entry(ARENA_SHRINKAGE) == "cpu:0"


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="RSS is read from Linux's /proc")
def test_rss_after_a_long_whole_decode_returns_to_what_it_was(speech: Speech) -> None:
    # a fresh engine: the shared one's arena may already hold an earlier test's longest run
    engine = OnnxEngine(packaged_model_bytes(), OnnxOptions(threads=2))
    fresh = speech.with_engine(engine)
    fresh.synthesize("Hello there.")  # a short run: the sessions' one-time allocations
    before = _rss_mb()
    audio = fresh.synthesize(_LONG)
    left = _rss_mb() - before
    assert audio.size / fresh.sample_rate > 6.0  # long enough to grow an arena that keeps what it held
    assert left < _LEFT_MB, f"{left:.0f} MB stayed resident after one long decode"


def _peak_rise_mb(work: Callable[[], None]) -> float:
    """How far RSS rose above its value before ``work``, at its highest while ``work`` ran (sampled)."""
    before = _rss_mb()
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(_SAMPLE_S):
            peak = max(peak, _rss_mb())

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    return max(peak, _rss_mb()) - before


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="RSS is read from Linux's /proc")
def test_two_long_whole_decodes_at_once_peak_near_one(speech: Speech) -> None:
    voice = speech.voice("af_heart")
    requests = [
        SynthesisRequest(" ".join(speech.phonemize(text)), voice.style, voice.speed)
        for text in (_LONG, _OTHER)
    ]
    engine = speech.engine

    def decode(request: SynthesisRequest) -> None:
        for _ in engine.stream(request):  # whole: timing, then the whole audio
            pass

    def side_by_side() -> None:
        threads = [threading.Thread(target=decode, args=(request,)) for request in requests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    decode(requests[1])  # the sessions' one-time allocations at this length
    alone = _peak_rise_mb(lambda: decode(requests[1]))
    beside = _peak_rise_mb(side_by_side)
    timings = [next(engine.stream(request)) for request in requests]  # a stream's first event
    samples = sum(timing.samples for timing in timings if isinstance(timing, SegmentTiming))
    assert samples // FRAME_SAMPLES > WHOLE_FRAMES_AT_ONCE  # together past the budget
    assert beside < _BESIDE_FACTOR * alone, f"{beside:.0f} MB at once against {alone:.0f} MB alone"
