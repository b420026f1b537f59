"""Large buffers freed go back to the system (koe.engine.memory): with glibc's mmap threshold fixed, a worker
thread that allocates and frees numpy arrays of changing sizes, behind small objects it keeps, leaves glibc's
heaps holding almost nothing free; with glibc's own moving threshold (the control), or a threshold the
environment chose, the heaps keep what was freed. Each churn runs in a fresh process and reads glibc's own
account (``mallinfo2``), not RSS, so nothing else running on the machine can move it. Every engine is loaded
after the threshold is set."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from koe.engine import registry
from koe.engine.assets import ModelSource
from koe.engine.registry import EngineOptions, load_engine
from koe.errors import AssetError


def _glibc_version() -> tuple[int, ...]:
    name, version = platform.libc_ver()
    return tuple(int(part) for part in version.split(".")) if name == "glibc" else ()


#: ``mallinfo2`` came with glibc 2.33.
glibc = pytest.mark.skipif(_glibc_version() < (2, 33), reason="glibc 2.33 or later (mallinfo2)")

MIB = 2**20
#: In a worker thread, as the engine's runs are: one large array freed (glibc's threshold rises to its size),
#: then four rounds of four arrays of 2 to 7 MiB held at once, a small array allocated after them and kept
#: (as a session's small objects are), the four freed. Prints whether the threshold was set and the MiB that
#: glibc's heaps hold free at the end.
_CHURN = f"""
import ctypes, sys, threading
import numpy as np
from koe.engine.memory import release_freed_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
released = release_freed_memory() if sys.argv[1] == "release" else None
pins = []

def churn():
    np.ones(24 * {MIB} // 8)
    for _ in range(4):
        held = [np.ones(size * {MIB} // 8) for size in (2, 3, 5, 7)]
        pins.append(np.ones(8192))
        del held

worker = threading.Thread(target=churn)
worker.start()
worker.join()
print(released, libc.mallinfo2().fordblks / {MIB})
"""
#: What glibc's heaps may hold free with the threshold fixed: Python's and numpy's small objects' slack.
_LEFT_MIB = 4.0
#: What they hold free at least when the arrays came from them (17-24 MiB held in trials).
_KEPT_MIB = 8.0
#: A threshold the environment chooses, above every array churned: they all come from the heap.
_CHOSEN = 32 * MIB


def _churn(mode: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """Whether the child set the threshold (``None``: it did not try), and the MiB its heaps hold free."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run(
        [sys.executable, "-c", _CHURN, mode],
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    released, free = done.stdout.split()
    return released, float(free)


@glibc
def test_large_buffers_freed_from_a_worker_thread_leave_the_heaps_empty() -> None:
    released, free = _churn("release")
    assert released == "True"
    assert free < _LEFT_MIB, f"glibc's heaps hold {free:.1f} MiB free, expected under {_LEFT_MIB}"


@glibc
def test_control_glibc_own_threshold_keeps_what_was_freed() -> None:
    released, free = _churn("as-is")
    assert released == "None"
    assert free > _KEPT_MIB, f"glibc's heaps hold {free:.1f} MiB free: the churn no longer shows the fix"


@glibc
@pytest.mark.parametrize(
    "env",
    [{"MALLOC_MMAP_THRESHOLD_": str(_CHOSEN)}, {"GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={_CHOSEN}"}],
    ids=["variable", "tunable"],
)
def test_a_threshold_the_environment_chose_wins(env: dict[str, str]) -> None:
    released, free = _churn("release", env)
    assert released == "False"
    assert free > _KEPT_MIB, (
        f"glibc's heaps hold {free:.1f} MiB free: koe's threshold replaced the chosen one"
    )


def test_loading_an_engine_sets_the_threshold_before_anything_else(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[str] = []

    def release() -> bool:
        calls.append("set")
        return True

    monkeypatch.setattr(registry, "release_freed_memory", release)
    with pytest.raises(AssetError):  # the model is read after the threshold is set
        load_engine(EngineOptions(), ModelSource(tmp_path / "missing.onnx", tmp_path))
    assert calls == ["set"]
