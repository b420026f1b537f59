"""This machine, as what was measured on it is kept: its CPU's identity, the cores this process may use, and
records of measurements.

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
import math
import os
import platform
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

logger = logging.getLogger(__name__)

_CPUINFO = Path("/proc/cpuinfo")
#: Where the files :func:`usable_cores` reads lie below the root it is given.
_OWN_CGROUPS = PurePosixPath("proc/self/cgroup")
_CGROUP_MOUNT = PurePosixPath("sys/fs/cgroup")
#: cgroup v2 (``quota period``, or ``max``) and v1 (``-1``, or microseconds beside ``cpu.cfs_period_us``).
_CPU_MAX = "cpu.max"
_V1_QUOTA, _V1_PERIOD = "cpu.cfs_quota_us", "cpu.cfs_period_us"
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


def prune_to_used_last(directory: Path, suffix: str, count: int) -> None:
    """Remove all but the ``count`` files named ``*suffix`` in ``directory`` that were used last (by
    modification time: whoever reads a kept file touches it), leaving writes in progress
    (:func:`partial_of`, hidden names) alone. Another process pruning at the same time is not an error."""
    try:
        kept = [path for path in directory.glob(f"*{suffix}") if not path.name.startswith(".")]
        kept.sort(key=lambda path: path.stat().st_mtime, reverse=True)
        for stale in kept[count:]:
            stale.unlink(missing_ok=True)
    except OSError as exc:  # a file removed between the listing and its stat
        logger.debug("pruning %s: %s", directory, exc)


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


def usable_cores(root: Path = Path("/")) -> int:
    """The cores this process may really use: the CPUs it may run on (``taskset``, a cpuset) or its
    cgroups' CPU quota (a container's ``--cpus``, systemd's ``CPUQuota=``), whichever is smaller, a
    fraction of a core rounded up; at least 1. ``root``: where ``/proc`` and ``/sys`` are read (tests)."""
    cores = len(os.sched_getaffinity(0))
    quota = _cpu_quota(root)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def _cpu_quota(root: Path) -> float | None:
    """The smallest CPU quota, in cores, of this process's cgroup and those above it (a limit on any of
    them binds); ``None`` where none is set or none can be read.

    The v2 hierarchy and v1's ``cpu`` controller are both read, along the path ``/proc/self/cgroup``
    gives; each mount's own root is read too, which is the container's cgroup where the path names one
    on the host that the container's mount does not show (v1 without a cgroup namespace)."""
    mount = root / _CGROUP_MOUNT
    files = [mount / _CPU_MAX, mount / "cpu" / _V1_QUOTA]
    try:
        lines = (root / _OWN_CGROUPS).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            base, name = mount, _CPU_MAX
        elif "cpu" in controllers.split(","):
            base, name = mount / "cpu", _V1_QUOTA
        else:
            continue
        parts = [part for part in PurePosixPath(path).parts if part not in ("/", ".", "..")]
        files += [base.joinpath(*parts[:depth]) / name for depth in range(len(parts), 0, -1)]
    quotas = [quota for file in files if (quota := _quota_of(file)) is not None]
    return min(quotas, default=None)


def _quota_of(file: Path) -> float | None:
    """The quota one ``cpu.max`` or ``cpu.cfs_quota_us`` sets, in cores; ``None``: no limit, or no such
    file (a malformed one is logged)."""
    try:
        if file.name == _CPU_MAX:
            quota, _, period = file.read_text(encoding="utf-8").strip().partition(" ")
        else:
            quota = file.read_text(encoding="utf-8").strip()
            period = (file.parent / _V1_PERIOD).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if quota in ("max", "-1"):
        return None
    try:
        cores = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        cores = 0.0
    if cores <= 0:
        logger.warning(
            "ignoring the CPU quota in %s: expected a positive quota and period, got %r and %r",
            file,
            quota,
            period,
        )
        return None
    return cores


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
