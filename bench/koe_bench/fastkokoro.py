"""fastkokoro, a peer Kokoro server, in its own process and environment, on koe's model and voices.

fastkokoro pins packages koe cannot share (phonemizer-fork against misaki's phonemizer), so it lives in a
virtual environment of its own (``make bench-peers`` builds ``.venv-peers``). The bench starts one server
there per streaming strategy — ``sentence`` (its default) and ``chunk`` (a cut after every comma, its
fastest start) — fed the model and voice files koe installed, and asks each for streamed PCM through its
OpenAI-style route, with its own defaults otherwise (what a user of it gets).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from koe.errors import UpstreamError
from koe_bench.peer_process import peer_process
from koe_bench.target import wait_ready
from koe_bench.turns import TurnTrace, streamed_pcm_turn

PEER = "fastkokoro"
#: What ``make bench-peers`` installs, and the interpreter it makes.
REQUIREMENT = "fastkokoro[cpu]==0.7.0"
STRATEGIES = ("sentence", "chunk")
#: Loading its ONNX session and G2P on a busy 2-core machine; never reached when healthy.
START_TIMEOUT_S = 300.0


def version(python: Path) -> str | None:
    """fastkokoro's version in ``python``'s environment; ``None`` when it is not installed there."""
    if not python.exists():
        return None
    probe = "import importlib.metadata as m; print(m.version('fastkokoro'))"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server(python: Path, strategy: str, model_path: Path, voices_path: Path) -> Iterator[str]:
    """A fastkokoro server streaming by ``strategy`` on a free loopback port until the block ends; yields
    its base URL once ``/health`` answers.

    Raises:
        UpstreamError: it exited or did not become ready (its log's tail is in the message).
    """
    port = _free_port()
    env = {
        **os.environ,
        "FASTKOKORO_MODEL_PATH": str(model_path),
        "FASTKOKORO_VOICES_PATH": str(voices_path),
        "FASTKOKORO_HOST": "127.0.0.1",
        "FASTKOKORO_PORT": str(port),
        "FASTKOKORO_STREAM_STRATEGY": strategy,
    }
    with tempfile.TemporaryDirectory(prefix="koe-fastkokoro-") as home:
        env["FASTKOKORO_CACHE_DIR"] = home
        command = [str(python), "-c", "from fastkokoro.cli import main; main()"]
        with peer_process(command, Path(home), env) as peer:
            url = f"http://127.0.0.1:{port}"
            try:
                wait_ready(url, START_TIMEOUT_S, lambda: peer.process.poll() is None, path="/health")
            except UpstreamError as exc:
                raise peer.failed(exc, f"{PEER} ({strategy})") from exc
            yield url


async def speech_turn(url: str, text: str, voice: str, name: str, *, starts_at: float) -> TurnTrace:
    """``POST /v1/audio/speech`` with ``stream: true``, PCM chunks timed from ``starts_at`` (monotonic)."""
    body = {"model": "kokoro", "input": text, "voice": voice, "response_format": "pcm", "stream": True}
    return await streamed_pcm_turn(TurnTrace(name), url + "/v1/audio/speech", body, PEER, starts_at=starts_at)
