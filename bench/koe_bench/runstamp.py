"""What every scenario's own result file records beside its figures: which scenario and command wrote it,
when it ran and how busy the machine was (so that a reader can tell a quiet run from a loaded one), and the
pace its simulated LLM wrote at."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from koe.agent.replay import ReplayPace
from koe.machine import usable_cores


def run_head() -> dict[str, Any]:
    """A result file's ``started_at`` and ``machine`` (its CPUs, the cores this process may use, load
    average), taken as the run starts."""
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "usable_cores": usable_cores(),
            "load_avg_1m": os.getloadavg()[0],
        },
    }


def report_head(
    schema: str, command: str, config: dict[str, Any], *, quick: bool | None = None
) -> dict[str, Any]:
    """A scenario's own result file as its run starts: ``schema``, ``command``, ``quick`` (only for a
    scenario that has a quick form), the :func:`run_head`, then ``config``, in that order."""
    head: dict[str, Any] = {"schema": schema, "command": command}
    if quick is not None:
        head["quick"] = quick
    return head | run_head() | {"config": config}


def pace_fields(pace: ReplayPace) -> dict[str, float]:
    """The simulated LLM's ``pace`` as a result file's ``config`` records it."""
    return {"tokens_per_s": pace.tokens_per_s, "first_token_delay_s": pace.first_token_delay_s}


def stamp_end(report: dict[str, Any], started: float) -> None:
    """Add the load average at the end and the seconds since ``started`` (``time.monotonic()``)."""
    report["machine"]["load_avg_1m_end"] = os.getloadavg()[0]
    report["elapsed_s"] = time.monotonic() - started
