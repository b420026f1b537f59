"""A server's Unix socket file: made with its mode before any client can connect, and removed only by the
server that made it.

A Unix socket is reached through a file, so the file's mode is who may connect (connecting needs write
permission on it): the transports served on one have no authentication, so that mode is their access
control. The socket is bound and given its mode before it listens, so no client connects in between. A
file left by a server that is gone (killed, so it never removed it) is replaced; a socket some server
still listens on, or a file that is no socket, is never touched. On close the file is removed only while
it is still the one made here, so a server that replaced it meanwhile keeps its own.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from contextlib import suppress
from pathlib import Path

from koe.errors import ConfigError

#: The owner and the owner's group may connect, nobody else (a client's user given the group, say).
SOCKET_MODE = 0o660
#: What a connection attempt to a socket file answers when no server listens on it any longer.
_STALE = frozenset({errno.ECONNREFUSED})
#: What it answers when a server listens on it: connected, or its backlog is full for now.
_LIVE = frozenset({0, errno.EAGAIN, errno.EWOULDBLOCK})


class SocketFile:
    """A Unix stream socket bound at ``path`` with ``mode``, not yet listening: hand :attr:`socket` to the
    server (``asyncio.start_unix_server(sock=...)``), which listens on it, and call :meth:`remove` once
    the server is closed."""

    def __init__(self, path: Path, mode: int = SOCKET_MODE) -> None:
        """Bind a socket at ``path``, replacing a stale socket file there.

        Raises:
            ConfigError: ``path`` is a file that is no socket, a socket a server listens on, or cannot be
                bound (no such directory, no permission, too long).
        """
        _clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(os.fspath(path))
        except OSError as exc:  # the file is not this socket's (a server that started meanwhile, say)
            sock.close()
            raise _refusal(path, exc.strerror) from exc
        try:
            os.chmod(path, mode)
            made = path.lstat()
        except OSError as exc:
            sock.close()
            with suppress(OSError):
                path.unlink()
            raise _refusal(path, exc.strerror) from exc
        self.path = path
        self.socket = sock
        self._made = (made.st_dev, made.st_ino)

    def remove(self) -> None:
        """Remove the socket file if it is still the one made here; idempotent. Call it once the server
        (or :attr:`socket`) is closed: a file with this one's inode that a server answers on is another
        server's, made in its place (a file system may give a new file a removed one's inode at once)."""
        with suppress(FileNotFoundError):
            now = self.path.lstat()
            ours = stat.S_ISSOCK(now.st_mode) and (now.st_dev, now.st_ino) == self._made
            if ours and _knock(self.path) in _STALE:
                self.path.unlink()


def _clear_stale(path: Path) -> None:
    """Remove ``path`` if it is a socket file no server listens on; nothing there is fine.

    Raises:
        ConfigError: ``path`` is no socket, or a server listens on it.
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _refusal(path, exc.strerror) from exc
    if not stat.S_ISSOCK(mode):
        raise _refusal(path, "a file that is no socket is there")
    answer = _knock(path)
    if answer in _LIVE:
        raise _refusal(path, "a server is listening on it")
    if answer not in _STALE:
        raise _refusal(path, os.strerror(answer))
    with suppress(FileNotFoundError):
        path.unlink()


def _knock(path: Path) -> int:
    """What connecting to the socket file ``path`` answers (an errno; 0: connected), without waiting."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)  # a live server's full backlog answers EAGAIN instead of blocking
        return probe.connect_ex(os.fspath(path))


def _refusal(path: Path, why: str | None) -> ConfigError:
    return ConfigError(f"cannot make the Unix socket {path}: {why}")
