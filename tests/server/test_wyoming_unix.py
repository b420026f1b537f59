"""The Wyoming server on a Unix socket (``wyoming_socket``), on the scripted fake engine, driven by the
reference client library's ``AsyncUnixClient``; the settings that choose it, and ``koe wyoming --uri``."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncUnixClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

from koe.cli import main
from koe.errors import ConfigError
from koe.server.socket_file import SOCKET_MODE
from koe.settings import MAX_SOCKET_PATH_BYTES, Settings
from live_server import ServerFactory
from support.fake import fake_seconds
from ws_events import WAIT_S, run

TEXT = "Hello there, how are you?"
PCM_BYTES_PER_SAMPLE = 2


@pytest.fixture
def path() -> Iterator[Path]:
    """A socket path in a short directory (pytest's own are too long for a socket's 107 bytes)."""
    with TemporaryDirectory(prefix="koe-") as folder:
        yield Path(folder) / "wyoming.sock"


async def describe_and_synthesize(path: Path) -> tuple[Info, list[Event]]:
    async with AsyncUnixClient(path, read_timeout=WAIT_S) as c:
        await c.write_event(Describe().event())
        described = await c.read_event()
        assert described is not None
        await c.write_event(Synthesize(text=TEXT).event())
        events = []
        while (event := await c.read_event()) is not None:
            events.append(event)
            if event.type in ("audio-stop", "error"):
                break
    return Info.from_event(described), events


def test_a_unix_socket_serves_wyoming_clients_of_its_owner_and_group_and_is_removed_on_stop(
    serve_fake: ServerFactory, path: Path
) -> None:
    with serve_fake(wyoming_socket=path) as live:
        assert live.app.state.wyoming.port == 0
        assert stat.S_IMODE(path.lstat().st_mode) == SOCKET_MODE
        info, events = run(lambda: describe_and_synthesize(path))
        assert info.tts[0].supports_synthesize_streaming
        assert [events[0].type, events[-1].type] == ["audio-start", "audio-stop"]
        start = AudioStart.from_event(events[0])
        assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
        pcm = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
        assert len(pcm) == round(fake_seconds(TEXT) * 24_000) * PCM_BYTES_PER_SAMPLE
    assert not path.exists()


def test_the_socket_is_read_from_koe_wyoming_socket() -> None:
    settings = Settings.from_env({"KOE_WYOMING_SOCKET": "/run/koe/wyoming.sock"})
    assert settings.wyoming_socket == Path("/run/koe/wyoming.sock")


@pytest.mark.parametrize(
    "values",
    [
        {"wyoming_socket": Path("/run/koe.sock"), "wyoming_port": 10200},
        {"wyoming_socket": Path("/run/koe.sock"), "wyoming_zeroconf": "koe"},
        {"wyoming_socket": Path("koe.sock")},
        {"wyoming_socket": Path("/" + "s" * MAX_SOCKET_PATH_BYTES)},
    ],
    ids=["with-port", "with-zeroconf", "relative", "too-long"],
)
def test_a_socket_with_a_port_zeroconf_or_an_unusable_path_is_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="setting wyoming_socket"):
        Settings(**values)


@pytest.mark.parametrize(
    "argv",
    [
        ["--uri", "stdio:"],
        ["--uri", "stdio:///dev/stdin"],
        ["--uri", "unix://relative/koe.sock"],
        ["--uri", "tcp://127.0.0.1"],
        ["--uri", "tcp://127.0.0.1:99999"],
        ["--uri", "unix:///run/koe.sock", "--port", "10200"],
    ],
    ids=[
        "stdio-no-slashes",
        "stdio-with-path",
        "unix-two-slashes",
        "tcp-no-port",
        "tcp-bad-port",
        "uri-and-port",
    ],
)
def test_koe_wyoming_refuses_a_uri_it_cannot_listen_on_before_loading(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wyoming", *argv]) == 2
    assert "--uri" in capsys.readouterr().err
