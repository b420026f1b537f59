"""The Wyoming transport: a server for Home Assistant and its satellites, on TCP, a Unix socket or the
process's own stdin and stdout, speaking through the same pipeline as every other transport
(docs/wyoming.md). The events are :mod:`koe.wire.wyoming`'s; each connection is a
:class:`~koe.server.wyoming_session.WyomingSession`, holding one of the runtime's session slots
(``max_sessions``, shared with the WebSocket sessions) while it is open.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path

from koe.errors import ConfigError, KoeError, OverloadedError
from koe.logs import log_refusal
from koe.pipeline.speech import Speech
from koe.server.discovery import Announcement
from koe.server.origin import is_loopback
from koe.server.runtime import Runtime
from koe.server.session import CLOSE_GRACE_S
from koe.server.socket_file import SocketFile
from koe.server.stdio import Stdio, streams
from koe.server.wyoming_session import TRANSPORT, WyomingSession
from koe.settings import Settings
from koe.wire.wyoming import Error, encode

logger = logging.getLogger(__name__)

#: Wyoming's usual port (Piper's, and what Home Assistant's integration suggests).
DEFAULT_PORT = 10200


def listen_uri(settings: Settings) -> str | None:
    """Where the Wyoming server of ``settings`` listens, written as Wyoming's own servers take it
    (``unix:///PATH`` or ``tcp://HOST:PORT``); None when neither ``wyoming_socket`` nor ``wyoming_port``
    is set."""
    if settings.wyoming_socket is not None:
        return f"unix://{settings.wyoming_socket}"
    if settings.wyoming_port is None:
        return None
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"tcp://{host}:{settings.wyoming_port}"


class WyomingServer:
    """The Wyoming server of ``runtime``: on the Unix socket ``settings.wyoming_socket`` when set, else on
    TCP at ``settings.host`` and ``settings.wyoming_port``, announced over zeroconf when
    ``settings.wyoming_zeroconf`` names it (the settings allow zeroconf with TCP only); or, instead of
    :meth:`start`, one connection on stdin and stdout (:meth:`serve_stdio`)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._settings = runtime.settings
        self._server: asyncio.Server | None = None
        self._socket_file: SocketFile | None = None
        self._sessions: dict[asyncio.Task[None], WyomingSession | None] = {}
        self._announcement: Announcement | None = None
        self._closed = False
        self.port = 0  # the TCP port it listens on, once started (0 on a Unix socket)

    async def start(self) -> None:
        """Listen, and announce when asked.

        Raises:
            ConfigError: the address cannot be listened on (taken, not this machine's; a socket path
                where another server listens or a file that is no socket is), or the zeroconf name or
                extra is missing.
        """
        settings = self._settings
        if settings.wyoming_socket is not None:
            await self._listen_unix(settings.wyoming_socket)
            return
        port = DEFAULT_PORT if settings.wyoming_port is None else settings.wyoming_port
        try:
            self._server = await asyncio.start_server(self._connected, settings.host, port)
        except OSError as exc:
            raise ConfigError(
                f"wyoming: cannot listen on {settings.host} port {port}: {exc.strerror}"
            ) from exc
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("wyoming: listening on %s port %d", settings.host, self.port)
        if not is_loopback(settings.host):
            logger.warning(
                "wyoming: listening on %s: Wyoming has no authentication, so anyone who can reach port %d "
                "may synthesize; restrict it with the bind address and a firewall (docs/wyoming.md)",
                settings.host, self.port,
            )  # fmt: skip
        if settings.wyoming_zeroconf is not None:
            self._announcement = await Announcement.start(settings.wyoming_zeroconf, settings.host, self.port)

    async def _listen_unix(self, path: Path) -> None:
        """Listen on a socket file at ``path`` that only its owner and group may connect to (Wyoming has
        no authentication: the file's mode is its access control)."""
        socket_file = SocketFile(path)
        try:
            self._server = await asyncio.start_unix_server(self._connected, sock=socket_file.socket)
        except OSError as exc:
            socket_file.socket.close()
            socket_file.remove()
            raise ConfigError(f"wyoming: cannot listen on the Unix socket {path}: {exc.strerror}") from exc
        self._socket_file = socket_file
        logger.info("wyoming: listening on the Unix socket %s", path)

    async def serve_stdio(self, stdio: Stdio) -> None:
        """Serve one connection on ``stdio`` until it ends, admitted as a TCP client is (refused with an
        ``error`` event while the model is not ready), and its last events written (a reader that takes
        nothing for ``CLOSE_GRACE_S`` is cut off). Cancelling is safe."""
        async with streams(stdio, flush_s=CLOSE_GRACE_S) as (reader, writer):
            logger.info("wyoming: serving one connection on stdin and stdout")
            await self._connected(reader, writer)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # asyncio runs each connection in a task
        self._sessions[task] = None
        runtime = self._runtime
        try:
            with runtime.admitted(TRANSPORT) as synthesizer:
                session = WyomingSession(reader, writer, runtime, synthesizer)
                self._sessions[task] = session
                await session.run()
        except KoeError as exc:  # refused: not ready, shutting down, too many sessions
            runtime.metrics.errors.labels(exc.code).inc()
            log_refusal(logger, "wyoming connection refused", exc)
            await _refuse(writer, Error(exc.code, exc.message))
        except Exception:
            logger.exception("a wyoming session failed")
            runtime.metrics.errors.labels("internal_error").inc()
            await _refuse(writer, Error("internal_error", "the server failed; see its log"))
        finally:
            del self._sessions[task]

    async def aclose(self) -> None:
        """Stop accepting; sessions between requests end now, those answering when their answers are sent,
        within ``shutdown_grace_s``; then the rest are dropped. The announcement is withdrawn. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._announcement is not None:
            await self._announcement.aclose()
            self._announcement = None
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._socket_file is not None:  # no new client finds it; those connected keep their sockets
            self._socket_file.remove()
            self._socket_file = None
        sessions = [session for session in self._sessions.values() if session is not None]
        for session in sessions:
            session.drain()
        if not self._sessions:
            return
        _, pending = await asyncio.wait(list(self._sessions), timeout=self._settings.shutdown_grace_s)
        for session in sessions:
            session.abort()  # a no-op for a session that has ended
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_GRACE_S)


async def _refuse(writer: asyncio.StreamWriter, error: Error) -> None:
    """Tell a connection why it is not served, then close it (waiting at most ``CLOSE_GRACE_S`` for a
    client that does not read)."""
    with suppress(ConnectionError, TimeoutError):
        writer.write(encode(error))
        async with asyncio.timeout(CLOSE_GRACE_S):
            await writer.drain()
    writer.close()


async def serve(settings: Settings, loading: Future[Speech] | None = None) -> None:
    """``koe wyoming``: the Wyoming server alone, with the model of ``settings`` (``loading``: already
    loading), until SIGTERM or SIGINT."""
    runtime = Runtime(settings, loading=loading)
    runtime.start()
    server = WyomingServer(runtime)
    stop = _stop_on_signals()
    try:
        await server.start()
        await stop.wait()
    finally:
        await server.aclose()
        await runtime.aclose()


async def serve_stdio(settings: Settings, stdio: Stdio, loading: Future[Speech] | None = None) -> None:
    """``koe wyoming --uri stdio://``: one connection on ``stdio``, with the model of ``settings``
    (``loading``: already loading), until stdin ends or SIGTERM or SIGINT. Nothing is read from stdin
    before the model has loaded: the one client there can be waits for it rather than being refused with
    ``not_ready``, which would end the process.

    Raises:
        OverloadedError: the model failed to load (``not_ready``); the client was told so in an ``error``
            event.
    """
    runtime = Runtime(settings, loading=loading)
    runtime.start()
    server = WyomingServer(runtime)
    stop = _stop_on_signals()
    serving: asyncio.Task[None] | None = None
    try:
        if await _unless_stopped(stop, runtime.loaded()):
            serving = asyncio.create_task(server.serve_stdio(stdio))
            await _unless_stopped(stop, serving)
    finally:
        await server.aclose()  # a connection still served ends as on a stopping TCP server
        if serving is not None:  # then its last events are written, or given up on
            await asyncio.wait([serving], timeout=CLOSE_GRACE_S)
        await runtime.aclose()
    if runtime.load_error is not None:  # the exit status tells whoever started the process
        raise OverloadedError(runtime.load_error, code="not_ready")


def _stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def _unless_stopped(stop: asyncio.Event, work: Awaitable[None]) -> bool:
    """Wait for ``work`` until it ends (``True``; its error is raised) or ``stop`` is set first (``False``:
    it runs on, for the caller's shutdown to end)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not task.done():
        return False
    task.result()
    return True
