"""When a scenario ran and how busy the machine was: what every result file records beside its figures,
so that a reader can tell a quiet run from a loaded one."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any


def run_head() -> dict[str, Any]:
    """A result file's ``started_at`` and ``machine`` (cores, load average), taken as the run starts."""
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
    }


def stamp_end(report: dict[str, Any], started: float) -> None:
    """Add the load average at the end and the seconds since ``started`` (``time.monotonic()``)."""
    report["machine"]["load_avg_1m_end"] = os.getloadavg()[0]
    report["elapsed_s"] = time.monotonic() - started
