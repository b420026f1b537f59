"""``koe wyoming`` as its own process (the CLI, its signal handling and shutdown are the real ones; the model
is the scripted fake, as in ``support.fake_serve``): it answers Wyoming clients on TCP or a Unix socket, and
SIGTERM ends it at once when no request is being answered."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from wyoming.client import AsyncClient, AsyncTcpClient, AsyncUnixClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

from live_server import LOOPBACK, loopback_socket
from ws_events import WAIT_S, run

#: Far more than an idle server needs to stop; a hang would take the whole grace (20 s).
STOP_S = 10.0

Connect = Callable[[], AsyncClient]


async def describe(connect: Connect) -> Event | None:
    async with connect() as c:
        await c.write_event(Describe().event())
        return await c.read_event()


async def until_ready(connect: Connect, server: subprocess.Popen[bytes], log: Path) -> Info:
    """The server's ``info``, once it listens and has loaded (``not_ready`` errors before)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            event = await describe(connect)
            if event is not None and Info.is_type(event.type):
                return Info.from_event(event)
        except (ConnectionError, FileNotFoundError):  # not listening yet; a socket file not made yet
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"koe wyoming never served: {await asyncio.to_thread(log.read_text)}")
        await asyncio.sleep(0.2)


@contextmanager
def koe_wyoming(log: Path, *argv: str) -> Iterator[subprocess.Popen[bytes]]:
    """``koe wyoming ARGV`` on the fake engine, its output in ``log``; killed if still running at the end."""
    tests = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "support.fake_serve", "--log-level", "INFO", "wyoming", *argv]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield server
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def test_koe_wyoming_serves_alone_and_stops_at_once_on_sigterm(tmp_path: Path) -> None:
    with loopback_socket() as probe:
        port = probe.getsockname()[1]
    log = tmp_path / "wyoming.log"
    with koe_wyoming(log, "--host", LOOPBACK, "--port", str(port)) as server:

        async def main() -> list[str]:
            info = await until_ready(lambda: AsyncTcpClient(LOOPBACK, port, read_timeout=WAIT_S), server, log)
            assert info.tts[0].supports_synthesize_streaming
            async with AsyncTcpClient(LOOPBACK, port, read_timeout=WAIT_S) as c:
                await c.write_event(Synthesize(text="Hello from the command line.").event())
                types = []
                while (event := await c.read_event()) is not None and event.type != "audio-stop":
                    types.append(event.type)
                # an idle connection is open when the signal comes: it must not hold the stop
                server.send_signal(signal.SIGTERM)
                assert await c.read_event() is None
            return types

        types = run(main)
        assert types[0] == "audio-start" and "audio-chunk" in types
        assert server.wait(STOP_S) == 0
    output = log.read_text()
    assert "wyoming: listening on 127.0.0.1 port" in output and "Traceback" not in output


def test_koe_wyoming_on_a_unix_socket_serves_there_and_removes_the_file_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "wyoming.log"
    with TemporaryDirectory(prefix="koe-") as folder:  # pytest's own folders are too long for a socket
        path = Path(folder) / "wyoming.sock"
        with koe_wyoming(log, "--uri", f"unix://{path}") as server:

            async def main() -> list[str]:
                await until_ready(lambda: AsyncUnixClient(path, read_timeout=WAIT_S), server, log)
                async with AsyncUnixClient(path, read_timeout=WAIT_S) as c:
                    await c.write_event(Synthesize(text="Hello over a Unix socket.").event())
                    types = []
                    while (event := await c.read_event()) is not None and event.type != "audio-stop":
                        types.append(event.type)
                return types

            types = run(main)
            assert types[0] == "audio-start" and "audio-chunk" in types
            server.send_signal(signal.SIGTERM)
            assert server.wait(STOP_S) == 0
        assert not path.exists()
    output = log.read_text()
    assert f"wyoming: listening on the Unix socket {path}" in output and "Traceback" not in output
