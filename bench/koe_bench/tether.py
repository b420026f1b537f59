"""Child processes that never outlive the benchmark: every server it starts is started here.

A ``finally`` stops a child when its block ends, by an exception or by Ctrl-C; while a block holds a child
on the main thread, SIGTERM is Ctrl-C too (``KeyboardInterrupt``: the children are stopped, no result is
written). SIGKILL cannot be handled, so on Linux each child asks the kernel for SIGTERM when its parent
dies (``PR_SET_PDEATHSIG``); elsewhere a killed benchmark still leaves its children running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import IO

#: prctl(2)'s option for the signal a process gets when its parent dies (``linux/prctl.h``).
_PR_SET_PDEATHSIG = 1
#: What a child gets when the benchmark dies: koe serve and the peers drain and stop on it.
_ON_PARENT_DEATH = signal.SIGTERM
#: How long a child has after SIGTERM before it is killed: koe serve drains its sessions first
#: (``shutdown_grace_s``, 20 s by default).
STOP_TIMEOUT_S = 60.0
#: Every child is forked by this one thread. The kernel sends the parent-death signal when the *thread*
#: that forked the child ends, not the process: a worker thread (``asyncio.to_thread``'s) may end while
#: its child runs on, and this one ends only when the interpreter does.
_FORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="koe-bench-forker")

_Output = int | IO[bytes] | None


def spawn(
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: _Output = None,
    stderr: _Output = None,
) -> subprocess.Popen[bytes]:
    """Start ``command``, on Linux to receive SIGTERM when this process dies, however it dies.

    Forking runs Python in the child, so the fork is a full one where it would otherwise be a ``vfork``: a
    copy of this process's page tables, longer the more of it is resident.
    """
    preexec = _die_with(os.getpid()) if sys.platform == "linux" else None
    started = _FORKER.submit(
        subprocess.Popen, command, env=env, cwd=cwd, stdout=stdout, stderr=stderr, preexec_fn=preexec
    )
    process: subprocess.Popen[bytes] = started.result()
    return process


@contextmanager
def tethered(
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: _Output = None,
    stderr: _Output = None,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` (:func:`spawn`) while inside; SIGTERM raises ``KeyboardInterrupt`` meanwhile (on the main
    thread, where nothing else handles SIGTERM). After, the child gets SIGTERM and is killed if it has not
    exited within ``stop_timeout_s``; a child that has exited (or been reaped) already is left alone."""
    with _sigterm_as_ctrl_c():
        process = spawn(command, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _die_with(parent: int) -> Callable[[], None]:
    """What a child of ``parent`` runs between fork and exec: ask for :data:`_ON_PARENT_DEATH` when its
    parent dies. The function is looked up here, in the parent: the child runs no import."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, _ON_PARENT_DEATH, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before the request: no signal will come for it
            os.kill(os.getpid(), _ON_PARENT_DEATH)

    return preexec


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while inside, so the blocks that hold children unwind and stop
    them. Only on the main thread (Python runs signal handlers there alone) and only where SIGTERM still
    has its default action; elsewhere it kills the process, and the children's parent-death signal stops
    them."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
