"""A long decode leaves no memory behind: ONNX Runtime's CPU arena hands back what a run held once the run
ends (koe.engine.onnx.sessions.releasing), so a process's RSS follows the segment in progress, not the
longest one it ever decoded."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from koe.engine.assets import packaged_model_bytes
from koe.engine.base import Cancel
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.sessions import ARENA_SHRINKAGE, RELEASING
from koe.engine.onnx.stages import stoppable
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
    # a fresh engine: the shared one's arena may already hold an earlier test's longest run; its threads do
    # not spin between operators, since another test worker shares the cores
    engine = OnnxEngine(packaged_model_bytes(), OnnxOptions(threads=2, spin=False))
    fresh = speech.with_engine(engine)
    fresh.synthesize("Hello there.")  # a short run: the sessions' one-time allocations
    before = _rss_mb()
    audio = fresh.synthesize(_LONG)
    left = _rss_mb() - before
    assert audio.size / fresh.sample_rate > 6.0  # long enough to grow an arena that keeps what it held
    assert left < _LEFT_MB, f"{left:.0f} MB stayed resident after one long decode"
