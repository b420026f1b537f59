"""Speaking through a remote koe TTS endpoint (``koe agent --tts-url``): the two-container layout.

Each agent session keeps one WebSocket session open to the TTS server; each turn is ``append`` per LLM
delta and a ``flush``; barge-in sends ``cancel`` and waits for ``cancelled``, after which the server sends
nothing more of that turn, so the next turn starts clean on the same socket.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractContextManager, nullcontext
from urllib.parse import urlsplit, urlunsplit

from koe.agent.base import Spoken
from koe.client.websocket import StreamClient, stream_url
from koe.errors import KoeError, OverloadedError, ProtocolError, SynthesisError, UpstreamError
from koe.pipeline.words import SpokenWord
from koe.types import SAMPLE_RATE
from koe.wire.messages import Cancelled, ConfigAck, Error, Flushed, SegmentEnd, SegmentStart, Words

logger = logging.getLogger(__name__)

#: How long the TTS server gets to acknowledge a cancel or a config before the session is dropped.
REPLY_TIMEOUT_S = 5.0
#: Error codes after which a turn goes on (the server keeps the session and skips the segment).
_SEGMENT_ERRORS = {"synthesis_failed"}


def _remote_error(error: Error) -> KoeError:
    """The server's ``error`` message as the local error the agent reports."""
    if error.code in _SEGMENT_ERRORS:
        return SynthesisError(error.message, code=error.code)
    if error.retry_after_s is not None:
        return OverloadedError(
            f"TTS server: {error.message}", code=error.code, retry_after_s=error.retry_after_s
        )
    return UpstreamError(f"TTS server: {error.code}: {error.message}")


class RemoteTurn:
    """One turn on the session's socket; only this turn reads the socket while it is open."""

    def __init__(self, client: StreamClient) -> None:
        self._client = client
        self._spoken = False  # ``flushed`` received: the server holds nothing of this turn
        self._broken = False
        self._offset_s = (
            0.0  # where the next segment starts in the turn's audio (``words`` are turn-relative)
        )

    async def add(self, text: str) -> None:
        if text:
            await self._client.append(text)

    async def finish(self) -> None:
        await self._client.flush()

    async def next(self) -> Spoken | None:
        """Collect the next segment's frames up to its ``segment_end``; ``None`` after ``flushed``."""
        start: SegmentStart | None = None
        pcm = bytearray()
        words: tuple[SpokenWord, ...] = ()
        while True:
            message = await self._client.receive()
            match message:
                case bytes():
                    pcm += message
                case SegmentStart():
                    start, pcm, words = message, bytearray(), ()
                case Words():
                    words = tuple(word.shifted(-self._offset_s) for word in message.words)
                case SegmentEnd() if start is not None:
                    spoken = Spoken(
                        start.index, start.text, start.source_span, bytes(pcm), SAMPLE_RATE, words
                    )
                    self._offset_s += spoken.duration_s
                    return spoken
                case Flushed():
                    self._spoken = True
                    return None
                case Error():
                    raise _remote_error(message)
                case ConfigAck():
                    continue
                case _:
                    raise ProtocolError(f"unexpected message from the TTS server during a turn: {message}")

    async def aclose(self) -> None:
        """Barge-in (or clean-up): cancel the turn on the server and wait until it says so."""
        if self._spoken:
            return
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                await self._client.cancel()
                while not isinstance(await self._client.receive(), Cancelled):
                    pass  # the cancelled turn's last frames and messages
        except (KoeError, TimeoutError) as exc:
            logger.warning(
                "TTS session %s did not acknowledge a cancel (%s); dropping it", self._client.url, exc
            )
            self._broken = True
        self._spoken = True

    @property
    def broken(self) -> bool:
        return self._broken


class RemoteSession:
    """One agent session's WebSocket to the TTS server, opened on the first turn, reopened if it broke."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._client: StreamClient | None = None
        self._last: RemoteTurn | None = None

    async def turn(self, voice: str, speed: float) -> RemoteTurn:
        """Open the next turn with ``voice`` and ``speed`` (sent as a ``config`` and acknowledged)."""
        if self._client is not None and self._last is not None and self._last.broken:
            await self.aclose()
        if self._client is None:
            self._client = await StreamClient.connect(
                stream_url(self._base_url, format="pcm_s16le", sample_rate=SAMPLE_RATE)
            )
        client = self._client
        await client.configure(voice=voice, speed=speed)
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            while True:
                reply = await client.receive()
                if isinstance(reply, ConfigAck):
                    break
                if isinstance(reply, Error):
                    raise _remote_error(reply)
        self._last = RemoteTurn(client)
        return self._last

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def remote_voices(base_url: str, timeout_s: float = 10.0) -> list[str]:
    """The voice names the TTS server lists at ``GET /v1/audio/voices`` ([] if it cannot say, logged).

    Raises:
        ConfigError: ``base_url`` is not an http(s) or ws(s) URL.
    """
    import httpx

    parts = urlsplit(stream_url(base_url))
    url = urlunsplit(("https" if parts.scheme == "wss" else "http", parts.netloc, "/v1/audio/voices", "", ""))
    try:
        response = httpx.get(url, timeout=timeout_s)
        response.raise_for_status()
        return [str(voice["id"]) for voice in response.json()["voices"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        logger.warning("could not list the TTS voices at %s (%s); offering the default only", url, exc)
        return []


class RemoteSpeaker:
    """A koe (or SageMaker-hosted koe) TTS server reached over its streaming protocol.

    Args:
        base_url: ``http://host:8080`` (the ``/v1/stream`` path is added) or a full ``ws://`` URL.
        voices: the voice names offered to clients (the remote server validates them).
    """

    ready = True

    def __init__(self, base_url: str, voices: list[str]) -> None:
        stream_url(base_url)  # a malformed URL fails at start-up, not on the first turn
        self._base_url = base_url
        self._voices = voices

    def admitted(self, transport: str) -> AbstractContextManager[object]:
        """Nothing to hold here: the remote server admits each session's WebSocket itself."""
        return nullcontext()

    def voices(self) -> list[str]:
        return list(self._voices)

    async def session(self) -> RemoteSession:
        return RemoteSession(self._base_url)
