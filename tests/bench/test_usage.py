"""What a stretch of this process's work cost: CPU by thread, and a peak of memory that a reset forgets."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from koe_bench import usage

#: A block of memory well above the noise of a Python process's resident size between two readings.
_BLOCK_MB = 50
#: How much of the block a reading must show: pages of the interpreter come and go around it.
_SEEN_MB = 40
#: CPU seconds a worker thread spends, and how much of it a meter on another thread must put apart.
_SPIN_S = 0.2
_SPIN_SEEN_S = 0.15


def _spin(cpu_s: float) -> None:
    started = time.thread_time()
    while time.thread_time() - started < cpu_s:
        pass


def test_a_meter_puts_other_threads_cpu_apart_from_its_own() -> None:
    meter = usage.Meter()
    worker = threading.Thread(target=_spin, args=(_SPIN_S,))
    worker.start()
    worker.join()
    spent = meter.stop()
    assert spent.cpu_s - spent.thread_cpu_s >= _SPIN_SEEN_S
    assert spent.thread_cpu_s < spent.cpu_s - _SPIN_SEEN_S


#: Run in a fresh interpreter: in a test worker, other tests' threads allocate and free beside the reading.
_PEAKS = f"""
import json
import numpy as np
from koe_bench import usage
first = usage.Meter()
resident = usage.status_mb("VmRSS")
block = np.ones({_BLOCK_MB} * 2**20, dtype=np.uint8)  # written: every page resident
del block  # freed back to the system (an allocation this large is a mapping of its own)
peak = first.stop().peak_rss_mb
high = usage.process_peak_mb()
later = usage.Meter().stop().peak_rss_mb  # reset after the block was freed
print(json.dumps([resident, peak, later, high, usage.process_peak_mb()]))
"""


def _peaks() -> list[float]:
    done = subprocess.run([sys.executable, "-c", _PEAKS], capture_output=True, text=True, check=True)
    readings: list[float] = json.loads(done.stdout)
    return readings


@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM and clear_refs are Linux's")
def test_a_meter_sees_the_peak_of_its_own_stretch_and_the_next_one_forgets_it() -> None:
    resident, peak, later, _, _ = _peaks()
    assert peak >= resident + _SEEN_MB
    assert later <= peak - _SEEN_MB


def test_a_size_line_that_the_status_lacks_reads_as_none() -> None:
    assert usage.status_mb("VmNoSuchLine") is None


@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM and clear_refs are Linux's")
def test_the_process_peak_survives_the_resets_that_give_each_stretch_its_own() -> None:
    resident, _, later, high, after_reset = _peaks()
    assert high >= resident + _SEEN_MB and later <= high - _SEEN_MB  # the reset forgot the block...
    assert after_reset >= high  # ...and the process's own peak did not
