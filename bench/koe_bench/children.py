"""Fresh koe processes, as the cold-start measurements start them: this koe or a baseline source tree,
torch importable or not, at a later start or at a container's first start; ``koe serve`` until ready.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from koe.errors import UpstreamError
from koe.server.background import LOOPBACK
from koe_bench.soak import free_port
from koe_bench.tether import tethered

#: A cold ``koe serve`` on a loaded 2-core machine is ready in well under this.
READY_TIMEOUT_S = 300.0
_POLL_S = 0.02
_KIB = 1024
#: The CPU image installs no torch, but a venv with the GPU extra does, and spaCy's thinc then imports it
#: (~2.5 s here). A child started this way runs koe as that image would: torch is unimportable.
_WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; from koe.cli import main; sys.exit(main())"
#: What an image's cache holds (the CPU image's ``koe install``, which loads the engine once: its float
#: vocoder, stage cut, optimized stages, calibration; the baseline's, d2dd8c3's, held the same but the first).
_IMAGE = ("dequantized", "stage-cut", "calibration", "optimized", "g2p")


def python() -> list[str]:
    """This interpreter, as a child runs it."""
    return [sys.executable, "-X", "utf8"]


@dataclass(frozen=True, slots=True)
class Koe:
    """Which koe a child runs: this one or a baseline source tree (``src``), with torch importable or not;
    with ``first_start_in``, each child in a cache of its own made there, holding what ``koe install`` leaves
    in an image: the voices, the stage cut's verdict, the default voice's calibration, the stage graphs ONNX
    Runtime optimized and the G2P's grown dictionaries; nothing measured before (what ``koe install``
    measured is keyed by the build machine's CPU), as at a container's start on another CPU than its
    image was built on."""

    src: Path | None = None
    without_torch: bool = False
    first_start_in: Path | None = None

    def command(self) -> list[str]:
        return [*python(), "-c", _WITHOUT_TORCH] if self.without_torch else [*python(), "-m", "koe.cli"]

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.src)} if self.src is not None else dict(os.environ)
        if self.first_start_in is not None:
            from koe.engine.assets import cache_dir

            fresh = Path(tempfile.mkdtemp(prefix="cache-", dir=self.first_start_in))
            (fresh / "voices").symlink_to(cache_dir() / "voices", target_is_directory=True)
            for name in _IMAGE:
                if (cache_dir() / name).is_dir():
                    shutil.copytree(cache_dir() / name, fresh / name)
            os.sync()  # the copies written back now, not while the child starts (~0.3–0.6 s of it here)
            env["KOE_CACHE_DIR"] = str(fresh)
        return env

    def kind(self, what: str) -> str:
        prefix = "baseline_" if self.src is not None else ""
        first = "_first_start" if self.first_start_in is not None else ""
        return f"{prefix}{what}{first}{'_without_torch' if self.without_torch else ''}"


#: This koe, torch as installed, at a later start.
THIS_KOE = Koe()


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def reap(process: subprocess.Popen[bytes]) -> tuple[int, float]:
    """Wait for ``process``: its exit code and its peak RSS in MB (from its own resource usage)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / _KIB


def vm_hwm_mb(pid: int) -> float:
    """A running process's peak resident memory so far, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / _KIB
    raise UpstreamError(f"no VmHWM in /proc/{pid}/status")


@contextmanager
def serving(
    command: list[str], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``command`` (a ``koe serve``) on a free loopback port while inside: the process and its URL; stopped
    with SIGTERM after (:func:`~koe_bench.tether.tethered`)."""
    port = free_port()
    serve = [*command, "--host", LOOPBACK, "--port", str(port)]
    with tethered(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        yield process, f"http://{LOOPBACK}:{port}"


def until_ready(process: subprocess.Popen[bytes], base_url: str, started: float) -> float:
    """Poll ``/ping`` until 200; the seconds since ``started`` (``time.perf_counter``)."""
    with httpx.Client(timeout=5.0) as client:
        while time.perf_counter() - started < READY_TIMEOUT_S:
            if process.poll() is not None:
                raise UpstreamError(f"koe serve exited with {process.returncode} before it was ready")
            try:
                if client.get(base_url + "/ping").status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(_POLL_S)
    raise UpstreamError(f"koe serve was not ready within {READY_TIMEOUT_S:g} s")
