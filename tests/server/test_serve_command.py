"""``koe serve`` as SageMaker runs it: a separate process, ready on /ping, gone within 30 s of SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from live_checks import wait_serving
from live_server import LOOPBACK, loopback_socket
from ws_events import WAIT_S, of_type, receive, run, send, until

#: SageMaker kills a container this long after SIGTERM.
SAGEMAKER_STOP_S = 30


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.model
def test_sigterm_closes_sessions_with_1012_and_exits_cleanly_in_time(tmp_path: Path) -> None:
    probe = loopback_socket()
    port = probe.getsockname()[1]
    probe.close()
    env = {**os.environ, "KOE_THREADS_PER_WORKER": "2"}
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koe.cli",
            "--log-level",
            "INFO",
            "serve",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_serving(f"http://{LOOPBACK}:{port}/ping", server, tmp_path / "serve.log", WAIT_S * 2)

        async def session() -> int | None:
            async with connect(f"ws://{LOOPBACK}:{port}/v1/stream") as ws:
                await send(
                    ws, {"type": "append", "text": "This turn is still speaking when the server stops. " * 2}
                )
                await send(ws, {"type": "flush"})
                await until(ws, of_type("segment"))
                stopped_at = time.monotonic()
                server.send_signal(signal.SIGTERM)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await receive(ws)
                assert time.monotonic() - stopped_at < SAGEMAKER_STOP_S
                return closed.value.rcvd.code if closed.value.rcvd else None

        assert run(session) == 1012
        # uvicorn re-raises the signal after its graceful shutdown: the status of any SIGTERM-stopped process
        assert server.wait(SAGEMAKER_STOP_S) == -signal.SIGTERM
        assert "Application shutdown complete" in (tmp_path / "serve.log").read_text()
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
        log.close()
