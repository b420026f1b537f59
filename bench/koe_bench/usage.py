"""What a stretch of this process's work cost: CPU seconds (all its threads, and the measuring thread's own
share apart) and the peak of its resident memory.

The peak is the kernel's high-water mark (``VmHWM`` in ``/proc/self/status``), which only ever rises;
writing ``5`` to ``/proc/self/clear_refs`` sets it back to the resident memory of the moment, so each
stretch gets a peak of its own. That also resets what ``getrusage`` reports as ``ru_maxrss``, so the
process's own peak is kept here across resets (:func:`process_peak_mb`). Where there is no ``/proc``
(not Linux), the memory figures are ``None``. CPU time is this process's only: child processes (a busy
neighbour started to load the machine) are not in it.
"""

from __future__ import annotations

import re
import resource
import time
from dataclasses import dataclass
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
#: What ``clear_refs`` takes to set the peak resident size back to the current one (proc(5)).
_RESET_PEAK = "5"
#: ``/proc/self/status`` gives sizes in kB (KiB); a report's MB are MiB, as :func:`koe_bench.engine.rss_mb`'s.
_KIB_PER_MB = 1024


def status_mb(field: str) -> float | None:
    """The size line ``field`` (``VmRSS``, ``VmHWM``) of ``/proc/self/status`` in MB; ``None`` where the
    file or the line is missing."""
    try:
        text = _STATUS.read_text()
    except OSError:
        return None
    found = re.search(rf"^{re.escape(field)}:\s+(\d+) kB$", text, re.MULTILINE)
    return int(found.group(1)) / _KIB_PER_MB if found else None


#: The highest ``VmHWM`` that a reset cleared, in MB: the process's peak before the last reset.
_cleared_peak_mb = 0.0


def reset_peak() -> bool:
    """Set this process's peak resident memory back to its resident memory now; ``False`` where the
    kernel offers no way to (then ``VmHWM`` is the peak since the process started)."""
    global _cleared_peak_mb
    before = status_mb("VmHWM")
    try:
        _CLEAR_REFS.write_text(_RESET_PEAK)
    except OSError:
        return False
    _cleared_peak_mb = max(_cleared_peak_mb, before or 0.0)
    return True


def process_peak_mb() -> float:
    """This process's peak resident memory since it started, in MB, resets or not."""
    now = status_mb("VmHWM")
    if now is None:  # no /proc: getrusage's peak, which nothing here resets
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KIB_PER_MB
    return max(_cleared_peak_mb, now)


@dataclass(frozen=True, slots=True)
class Spent:
    """What a stretch cost: ``cpu_s`` by every thread of this process, ``thread_cpu_s`` of them by the
    thread that measured, and the peak resident memory in MB (``None``: no peak of the stretch's own)."""

    cpu_s: float
    thread_cpu_s: float
    peak_rss_mb: float | None


class Meter:
    """Started on construction (the peak reset, the clocks read), read by :meth:`stop` on the same thread:
    the thread's share is the CPU time of the thread that called both."""

    def __init__(self) -> None:
        self._peak_is_own = reset_peak()
        self._cpu = time.process_time()
        self._thread_cpu = time.thread_time()

    def stop(self) -> Spent:
        """The CPU time since the start, and the peak since then where the reset worked."""
        return Spent(
            time.process_time() - self._cpu,
            time.thread_time() - self._thread_cpu,
            status_mb("VmHWM") if self._peak_is_own else None,
        )
