"""A long decode leaves no memory behind: ONNX Runtime's CPU arena hands back what a run held once the run
ends (koe.engine.onnx.sessions.releasing), so a process's RSS follows the segment in progress, not the
longest one it ever decoded; and while it runs, a decode holds no more than its tensors in use
(koe.engine.onnx.sessions.MEMORY_PATTERN), each resblock normalizing its input itself
(koe.engine.onnx.unshare)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
#: What a whole vocoder decode may hold at its peak per frame (25 ms) it decodes: 0.29-0.35 MB are its tensors
#: in use with each resblock normalizing its input itself (koe.engine.onnx.unshare); 0.41 MB with the export's
#: shared normalized tensor, 0.57 MB with a layout by ONNX Runtime's memory pattern (one-offs, 2026-12-07).
_PEAK_MB_PER_FRAME = 0.39
#: A fresh interpreter decodes one length twice (the second run is the one a memory pattern would lay out)
#: and prints the frames and the second run's peak resident memory above what was resident before it, in MB.
_DECODE_AGAIN = """
import json, re
from pathlib import Path
import numpy as np
from koe.engine.assets import packaged_model_bytes
from koe.engine.memory import release_freed_memory
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.onnx.stages import PROBE_PHONEMES
from koe.engine.vocab import tokenize

def mb(field):
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\\s+(\\d+) kB$", status, re.MULTILINE).group(1)) / 1024

release_freed_memory()  # as every process that loads the engine does
stages = OnnxEngine(packaged_model_bytes(), OnnxOptions(threads=2, spin=False)).streaming.stages
style = (np.random.default_rng(0).standard_normal((1, 256)) * 0.2).astype(np.float32)
front = stages.run_front(tokenize(" ".join([PROBE_PHONEMES] * 4)), style, 1.0)
stages.decode(front, style)
Path("/proc/self/clear_refs").write_text("5")
before = mb("VmRSS")
stages.decode(front, style)
print(json.dumps([front.frames, mb("VmHWM") - before]))
"""


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


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="the peak is reset by Linux's /proc")
def test_a_whole_decode_of_a_length_seen_before_holds_only_its_tensors_in_use() -> None:
    done = subprocess.run([sys.executable, "-c", _DECODE_AGAIN], capture_output=True, text=True, check=True)
    frames, peak_mb = json.loads(done.stdout)
    assert frames >= 200  # long enough that the vocoder's tensors dominate the peak
    assert peak_mb / frames < _PEAK_MB_PER_FRAME, f"{peak_mb:.0f} MB at the peak of a {frames}-frame decode"
