"""This machine, as what was measured on it is kept: its CPU's identity, and records of measurements.

A start measures how fast this machine runs the model (the scheduler's segment costs, the vocoder window's
costs): seconds of a cold start that give the same answer each time on the same machine, model and
settings. :class:`Measured` keeps such an answer in koe's cache under a key of everything it depends on,
the CPU among them, so that the next start reads it instead; every finished segment still refines the
costs after. A missing, unreadable or malformed record, or one of another key, reads as nothing: measure
again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_CPUINFO = Path("/proc/cpuinfo")
#: The lines of ``/proc/cpuinfo`` that name the instructions ONNX Runtime's kernels choose between.
_CPU_FEATURES = ("flags", "Features")
_SCHEMA = "koe-measured/1"
#: Where in koe's cache the records are kept.
MEASURED_DIR = "measured"


def partial_of(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: a name of this process's own (two processes
    sharing a cache, two servers or two test workers, would otherwise write one file and rename it from
    under each other), with ``path``'s suffix kept (``np.savez`` adds ``.npz`` to a name without it)."""
    return path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")


def cpu_identity() -> str:
    """The machine and its CPU's instruction-set flags (Linux), as one string."""
    features = ""
    try:
        for line in _CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines():
            field, _, value = line.partition(":")
            if field.strip() in _CPU_FEATURES:
                features = " ".join(sorted(value.split()))
                break
    except OSError:
        features = platform.processor()
    return f"{platform.machine()} {hashlib.sha256(features.encode()).hexdigest()}"


class Measured:
    """One measurement kept as ``directory/<digest of key>.json``; ``key`` (JSON values) names what the
    measurement depends on, this CPU (:func:`cpu_identity`) added to it."""

    def __init__(self, directory: Path, key: Mapping[str, Any]) -> None:
        self.key = {**key, "cpu": cpu_identity()}
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()
        self.path = directory / f"{digest}.json"

    def read(self) -> dict[str, Any] | None:
        """The values measured under this key before, or ``None`` (logged when a record is damaged)."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            logger.warning("ignoring the unreadable measurement %s: %s", self.path, exc)
            return None
        if not (
            isinstance(record, dict)
            and record.get("schema") == _SCHEMA
            and record.get("key") == self.key
            and isinstance(record.get("values"), dict)
        ):
            logger.warning("ignoring the measurement %s: not of this key", self.path)
            return None
        values: dict[str, Any] = record["values"]
        return values

    def write(self, values: Mapping[str, Any]) -> None:
        """Keep ``values`` (JSON); a cache that cannot be written costs a measurement per start, nothing
        more."""
        partial = partial_of(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            record = {"schema": _SCHEMA, "key": self.key, "values": dict(values)}
            partial.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            partial.replace(self.path)
        except OSError as exc:
            logger.info("measurements are not kept: %s", exc)  # a read-only cache (an image)
