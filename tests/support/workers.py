"""What pytest's workers share (``make pytest`` runs pytest-xdist). Each worker is a process with session
fixtures of its own, so a result that is costly and the same for all (the CDK synth) is built by the first
worker that needs it, under a lock, and read by the others; a cache that every worker may fill (koe's) is
filled by one worker at a time. Outside xdist both are plain calls."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The folder this run's workers share (the parent of each worker's own temporary folder), or None
    when pytest runs without workers."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    return tmp_path_factory.getbasetemp().parent


@contextmanager
def one_worker_at_a_time(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Hold the run's lock called ``name`` (an flock, released even when the worker dies)."""
    folder = _run_folder(tmp_path_factory)
    if folder is None:
        yield
        return
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)``'s result, built once in the run: by the first worker that asks, into a folder all
    the workers see; the others wait for it, then reuse it. A build that fails is tried again by the next."""
    folder = _run_folder(tmp_path_factory)
    if folder is None:
        return build(tmp_path_factory.mktemp(name))
    with one_worker_at_a_time(tmp_path_factory, name):
        done = folder / f"{name}.done"
        if done.exists():
            return Path(done.read_text(encoding="utf-8"))
        target = folder / name
        target.mkdir(exist_ok=True)
        result = build(target)
        done.write_text(str(result), encoding="utf-8")
        return result
