"""A server's Unix socket file: its mode set before anyone connects, a stale one replaced, a live one or
another file left alone, and only its own file removed."""

from __future__ import annotations

import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest

from koe.errors import ConfigError
from koe.server.socket_file import SOCKET_MODE, SocketFile


@pytest.fixture
def path() -> Iterator[Path]:
    """A socket path in a short directory (pytest's own are too long for a socket's 107 bytes)."""
    with TemporaryDirectory(prefix="koe-") as folder:
        yield Path(folder) / "koe.sock"


def listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    return sock


def connects(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        return client.connect_ex(str(path)) == 0


def test_the_socket_file_has_its_mode_before_the_server_listens(path: Path) -> None:
    made = SocketFile(path)
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == SOCKET_MODE
        assert not connects(path)  # bound, not listening: nobody is let in before the mode is set
        made.socket.listen()
        assert connects(path)
    finally:
        made.socket.close()
        made.remove()
    assert not path.exists()


def test_a_socket_file_left_by_a_server_that_is_gone_is_replaced(path: Path) -> None:
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.bind(str(path))
    gone.close()  # a killed server leaves its file behind
    made = SocketFile(path)
    made.socket.listen()
    try:
        assert connects(path)
    finally:
        made.socket.close()
        made.remove()


def test_a_socket_another_server_listens_on_is_left_to_it(path: Path) -> None:
    with listening(path):
        with pytest.raises(ConfigError, match="a server is listening on it"):
            SocketFile(path)
        assert connects(path)


def test_a_file_that_is_no_socket_is_never_replaced(path: Path) -> None:
    path.write_text("keep me")
    with pytest.raises(ConfigError, match="a file that is no socket is there"):
        SocketFile(path)
    assert path.read_text() == "keep me"


def test_a_socket_that_cannot_be_bound_is_a_config_error_naming_its_path(path: Path) -> None:
    missing = path.parent / "no such folder" / "koe.sock"
    with pytest.raises(ConfigError, match="no such folder"):
        SocketFile(missing)


def test_removing_leaves_a_socket_file_another_server_made_since(path: Path) -> None:
    made = SocketFile(path)
    made.socket.close()
    path.unlink()
    with listening(path):  # a second server took the path meanwhile
        made.remove()
        assert connects(path)
