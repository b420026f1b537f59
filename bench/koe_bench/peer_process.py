"""A peer server (fastkokoro, wyoming-piper) as a subprocess of the benchmark, its output kept in a log whose
tail explains a failed start, and stopped however the block or the benchmark ends (:mod:`koe_bench.tether`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from koe.errors import UpstreamError
from koe_bench.tether import tethered

#: How long a peer has to exit after SIGTERM before it is killed.
STOP_TIMEOUT_S = 10.0
#: How much of a peer's log a failed start quotes.
LOG_TAIL_CHARS = 2000


@dataclass(frozen=True)
class PeerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path

    def failed(self, exc: UpstreamError, what: str) -> UpstreamError:
        """``exc`` as ``what`` did not start, with the tail of the peer's log."""
        tail = self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        return UpstreamError(f"{what} did not start: {exc}\n{tail}")


@contextmanager
def peer_process(
    command: list[str], home: Path, env: Mapping[str, str] | None = None
) -> Iterator[PeerProcess]:
    """Run ``command`` in ``home`` (its log there too) until the block ends; terminated, then killed if it
    does not exit within :data:`STOP_TIMEOUT_S`."""
    log_path = home / "server.log"
    program = Path(command[0])
    if len(program.parts) > 1:  # a path such as .venv-peers/bin/python: relative to here, not to ``home``
        command = [str(program.absolute()), *command[1:]]
    with (
        log_path.open("wb") as log,
        tethered(
            command, env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT, stop_timeout_s=STOP_TIMEOUT_S
        ) as process,
    ):
        yield PeerProcess(process, log_path)
