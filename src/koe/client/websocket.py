"""The plain-WebSocket transport to a koe server (``/v1/stream``, or SageMaker's path on a local container).

Built on the ``websockets`` asyncio client. :func:`connect` opens the transport and wraps it in a
:class:`koe.client.session.StreamClient`, which holds the session logic and knows no transport.
A server with ``KOE_API_KEY`` gets the key as ``Authorization: Bearer <key>`` on the handshake; one that
refuses it closes with 1008 ``unauthorized``, which is reported as such, not as a lost connection.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from koe.client.session import StreamClient
from koe.errors import ConfigError, ConnectionLostError, UpstreamError

__all__ = ["STREAM_PATH", "StreamClient", "WebSocketTransport", "auth_headers", "connect", "stream_url"]

#: The path koe clients use (SageMaker's own is ``/invocations-bidirectional-stream``, same protocol).
STREAM_PATH = "/v1/stream"
_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
#: The close code and reason a koe server refuses a missing or wrong API key with (koe.server.access).
_REFUSED = (1008, "unauthorized")


def stream_url(base: str, **query: str | float | int | None) -> str:
    """The WebSocket URL for ``base`` (``http(s)://host:port`` or a full ``ws(s)://`` URL) with a query.

    Raises:
        ConfigError: not an http, https, ws or wss URL.
    """
    parts = urlsplit(base)
    if parts.scheme not in _WS_SCHEMES or not parts.netloc:
        raise ConfigError(
            f"expected a TTS URL like http://host:8080 or ws://host:8080/v1/stream, got {base!r}",
            code="invalid_field",
        )
    path = parts.path if parts.scheme in ("ws", "wss") and parts.path not in ("", "/") else STREAM_PATH
    params = urlencode({k: v for k, v in query.items() if v is not None})
    return urlunsplit((_WS_SCHEMES[parts.scheme], parts.netloc, path, params, ""))


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The handshake's (or an HTTP request's) headers that carry ``api_key``; none without a key."""
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


class WebSocketTransport:
    """Text and binary frames over one ``websockets`` connection."""

    def __init__(self, connection: Any, url: str) -> None:
        self._ws = connection
        self.url = url

    @classmethod
    async def open(
        cls, url: str, *, api_key: str | None = None, open_timeout_s: float = 10.0
    ) -> WebSocketTransport:
        """Connect to ``url``, presenting ``api_key`` when given.

        Raises:
            UpstreamError: the server cannot be reached or refused the connection.
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException

        try:
            connection = await connect(
                url, open_timeout=open_timeout_s, max_size=None, additional_headers=auth_headers(api_key)
            )
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise UpstreamError(f"cannot open a TTS session at {url}: {exc}") from exc
        return cls(connection, url)

    def _closed(self, exc: Exception) -> UpstreamError:
        """A closed connection: refused for its key (final), or lost (a new one may succeed)."""
        received = getattr(exc, "rcvd", None)
        if received is not None and (received.code, received.reason) == _REFUSED:
            return UpstreamError(
                f"the TTS server at {self.url} refused the API key (set KOE_API_KEY or --tts-api-key "
                "to the server's key)"
            )
        return ConnectionLostError(f"the TTS session at {self.url} closed: {exc}")

    async def send_text(self, text: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise self._closed(exc) from exc

    async def receive(self) -> str | bytes:
        """The next frame. Cancelling is safe: ``websockets`` keeps an interrupted frame for the next call."""
        from websockets.exceptions import ConnectionClosed

        try:
            frame: str | bytes = await self._ws.recv()
        except ConnectionClosed as exc:
            raise self._closed(exc) from exc
        return frame

    async def aclose(self) -> None:
        """Close with code 1000; idempotent."""
        await self._ws.close()


async def connect(url: str, *, api_key: str | None = None, open_timeout_s: float = 10.0) -> StreamClient:
    """A session over a plain WebSocket at ``url`` (see :func:`stream_url`), presenting ``api_key`` to a
    server that needs one.

    Raises:
        UpstreamError: the server cannot be reached or refused the connection.
    """
    return StreamClient(await WebSocketTransport.open(url, api_key=api_key, open_timeout_s=open_timeout_s))
