"""The benchmark's child servers die with it: a real parent holds a sleeping child and is sent SIGTERM or
SIGKILL; the child must be gone, whatever the parent could do about it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from koe_bench.tether import spawn
from live_checks import wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")

#: A child that would outlive every test if nothing stopped it.
_SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
#: Parents that start a child as the benchmark starts its servers, say its pid, then wait: the sleeper, and
#: ``koe serve`` on the fake engine as the cold-start scenarios start it, once it is ready.
_PARENTS = {
    "sleeper": f"""
import sys, time
from koe_bench.tether import tethered
with tethered({_SLEEPER!r}) as child:
    print(child.pid, flush=True)
    time.sleep(120)
""",
    "koe_serve": """
import sys, time
from koe_bench.children import serving, until_ready
with serving([sys.executable, "-m", "support.fake_serve", "serve"]) as (child, url):
    until_ready(child, url, time.perf_counter())
    print(child.pid, flush=True)
    time.sleep(120)
""",
}
#: How long a child may take to die once its parent is gone (it dies at once; this is a loaded machine).
_DEATH_S = 10.0
#: How long a child that must live on is watched after its forking thread ended: the parent-death signal
#: is sent as that thread exits, so a child it kills is dead well within this.
_WATCH_S = 1.0


def _gone(pid: int) -> bool:
    """No process ``pid`` runs: none exists, or only its zombie waits for a parent that does not reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


@pytest.fixture(params=["sleeper", pytest.param("koe_serve", marks=pytest.mark.server)])
def parent(request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A parent of each kind and its child's pid; the child is killed after a test that left it running."""
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", _PARENTS[request.param]]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"the parent exited with {process.wait()} before starting its child"
        child = int(line)
        try:
            yield process, child
        finally:
            process.kill()
            process.wait()
            if not _gone(child):
                os.kill(child, signal.SIGKILL)


def test_a_child_dies_when_its_parent_is_killed(parent: tuple[subprocess.Popen[str], int]) -> None:
    process, child = parent
    process.kill()
    assert process.wait() == -signal.SIGKILL
    wait_for(lambda: _gone(child), "the child of a killed parent to die", _DEATH_S)


def test_sigterm_to_the_parent_stops_its_child_as_ctrl_c_does(
    parent: tuple[subprocess.Popen[str], int],
) -> None:
    """The parent handles SIGTERM (it dies of the ``KeyboardInterrupt`` it raised, not of SIGTERM) and has
    stopped and reaped its child by the time it exits."""
    process, child = parent
    process.terminate()
    assert process.wait(_DEATH_S) == -signal.SIGINT
    assert _gone(child)


def test_a_child_outlives_the_thread_that_asked_for_it() -> None:
    """The parent-death signal comes when the thread that forked the child ends: a child started from a
    short-lived thread (``asyncio.to_thread``'s) still runs after that thread is gone."""
    started: list[subprocess.Popen[bytes]] = []
    worker = threading.Thread(target=lambda: started.append(spawn(_SLEEPER)))
    worker.start()
    worker.join()
    wait_for(lambda: not Path(f"/proc/self/task/{worker.native_id}").exists(), "the thread to end")
    (child,) = started
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(_WATCH_S)
    finally:
        child.kill()
        child.wait()
