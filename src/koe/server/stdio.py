"""This process's stdin and stdout as one connection's streams (``koe wyoming --uri stdio://``).

The two descriptors are taken from the process before anything else could use them (:func:`claim`):
descriptor 0 then reads the null device and descriptor 1 writes to stderr, so a library's ``print``, a C
library's write to descriptor 1 or a prompt reading stdin never mixes with the protocol's bytes. asyncio
waits on pipes, sockets and terminals only, so a regular file (``< events.bin``) is refused.

An asyncio pipe transport, unlike a socket's, reports its loss a second time, and fails, when it is
aborted after it has closed: :func:`drop` aborts only a transport that has something to drop.
"""

from __future__ import annotations

import asyncio
import io
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from koe.errors import ConfigError

#: ``--uri`` for this transport, spelled as Wyoming's own servers take it.
STDIO_URI = "stdio://"


@dataclass(frozen=True, slots=True)
class Stdio:
    """The process's own stdin and stdout, unbuffered, taken by :func:`claim`."""

    stdin: io.FileIO
    stdout: io.FileIO


def claim() -> Stdio:
    """Take stdin and stdout for the protocol: the two as unbuffered files on new descriptors, while
    descriptor 0 is pointed at the null device and 1 at stderr. Call it before anything that may print.

    Raises:
        ConfigError: stdin or stdout is closed, or is not a pipe, a socket or a terminal.
    """
    for fd, name in ((0, "stdin"), (1, "stdout")):
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            raise ConfigError(f"{STDIO_URI}: expected {name} to be open, got {exc.strerror}") from exc
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            kind = "a regular file" if stat.S_ISREG(mode) else f"a file of type {stat.S_IFMT(mode):#o}"
            raise ConfigError(
                f"{STDIO_URI}: expected {name} to be a pipe, a socket or a terminal, got {kind}"
            )
    sys.stdout.flush()  # what Python buffered so far belongs to no event: it goes out before the swap
    taken = Stdio(io.FileIO(os.dup(0), "rb"), io.FileIO(os.dup(1), "wb"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return taken


@asynccontextmanager
async def streams(
    stdio: Stdio, *, flush_s: float
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A reader of ``stdio.stdin`` and a writer of ``stdio.stdout``, both closed on leaving (and the files
    with them), where the writer's last bytes get ``flush_s`` to be taken (the process exits next, which
    would drop them); a reader that takes nothing is cut off."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    incoming, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdio.stdin)
    try:
        outgoing, protocol = await loop.connect_write_pipe(_Outgoing, stdio.stdout)
        try:
            yield reader, asyncio.StreamWriter(outgoing, protocol, None, loop)
            outgoing.close()
            with suppress(TimeoutError):
                async with asyncio.timeout(flush_s):
                    await asyncio.shield(protocol.closed)
        finally:
            drop(outgoing)
    finally:
        incoming.close()


def drop(transport: asyncio.WriteTransport) -> None:
    """Abort ``transport`` unless it is closed or closing with nothing left to send (its loss is then
    reported already, or about to be)."""
    if transport.is_closing() and not transport.get_write_buffer_size():
        return
    transport.abort()


class _Outgoing(asyncio.streams.FlowControlMixin):
    """stdout's protocol: the flow control a writer's ``drain`` needs, and :attr:`closed`, done once the
    pipe has closed (everything written) or was lost (its reader gone, or aborted)."""

    def __init__(self) -> None:
        super().__init__()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.closed.done():
            self.closed.set_result(None)
