"""Speaking through a remote koe (``koe agent --tts URL``): a koe server, or koe on a SageMaker endpoint.

Each agent session keeps one streaming session open to the TTS (a WebSocket, or SageMaker's bidirectional
stream: :mod:`koe.client.target`); each turn is ``append`` per LLM delta and a ``flush``; barge-in sends
``cancel`` and waits for ``cancelled``, after which the server sends nothing more of that turn, so the
next turn starts clean on the same connection. Each audio frame of a segment is passed on as it arrives,
so a segment the server decodes in windows (a turn's first) is heard as its windows are decoded.

A connection that closed (the TTS restarted, the stream timed out) fails the turn it was speaking with an
``error`` event; the next turn opens a new one and says so (``reconnected``). A connection that closes
between turns is replaced when the next turn starts, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

from koe.agent.base import SegmentPieces, Spoken
from koe.client.session import StreamClient
from koe.client.target import SageMakerTarget, TtsTarget
from koe.client.websocket import auth_headers
from koe.errors import (
    ConfigError,
    ConnectionLostError,
    KoeError,
    OverloadedError,
    ProtocolError,
    SynthesisError,
    UpstreamError,
)
from koe.types import SAMPLE_RATE
from koe.wire.messages import Cancelled, ConfigAck, Error, Flushed, SegmentEnd, SegmentStart, Words

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: How long the TTS server gets to acknowledge a cancel or a config before the session is dropped.
REPLY_TIMEOUT_S = 5.0
#: Error codes after which a turn goes on (the server keeps the session and skips the segment).
_SEGMENT_ERRORS = {"synthesis_failed", "unsupported_script"}
#: The audio every turn asks for: what the agent's events carry.
_STREAM_OPTIONS = {"format": "pcm_s16le", "sample_rate": SAMPLE_RATE}
_HTTP_UNAUTHORIZED = 401
_BYTES_PER_SAMPLE = 2  # of ``pcm_s16le``


def _remote_error(error: Error) -> KoeError:
    """The server's ``error`` message as the local error the agent reports."""
    if error.code in _SEGMENT_ERRORS:
        return SynthesisError(error.message, code=error.code)
    if error.retry_after_s is not None:
        return OverloadedError(
            f"TTS server: {error.message}", code=error.code, retry_after_s=error.retry_after_s
        )
    if error.code == "unauthorized":
        return UpstreamError(
            "the TTS server refused the agent's API key (set KOE_API_KEY or --tts-api-key to its key)"
        )
    return UpstreamError(f"TTS server: {error.code}: {error.message}")


class RemoteTurn:
    """One turn on the session's connection; only this turn reads it while the turn is open.

    Attributes:
        reconnected: why this turn runs on a new connection (the previous one closed); ``None`` otherwise.
    """

    def __init__(self, client: StreamClient, reconnected: str | None = None) -> None:
        self._client = client
        self.reconnected = reconnected
        self._spoken = False  # ``flushed`` received: the server holds nothing of this turn
        self._broken: str | None = None  # why the connection cannot serve another turn
        self._segment: SegmentPieces | None = None  # between its ``segment`` and its ``segment_end``
        self._received = 0  # bytes of the turn's audio so far (the server's ``words`` are turn-relative)

    async def add(self, text: str) -> None:
        if text:
            await self._guard(self._client.append(text))

    async def finish(self) -> None:
        await self._guard(self._client.flush())

    async def next(self) -> Spoken | None:
        """The next piece of a segment: each audio frame as it arrives (the server sends a windowed
        segment's parts as they are decoded), and at its ``segment_end`` the piece that completes it,
        empty since every frame has gone on; ``None`` after ``flushed``.

        Raises:
            ProtocolError: audio outside a segment, or a message a turn does not expect.
        """
        while True:
            message = await self._guard(self._client.receive())
            match message:
                case bytes():
                    if self._segment is None:
                        raise ProtocolError("the TTS server sent audio outside a segment")
                    self._received += len(message)
                    return self._segment.piece(message, last=False)
                case SegmentStart():
                    self._segment = SegmentPieces(
                        message.index, message.text, message.source_span, SAMPLE_RATE
                    )
                case Words() if self._segment is not None:  # before the segment's first frame
                    start_s = self._received / (_BYTES_PER_SAMPLE * SAMPLE_RATE)
                    self._segment.words = tuple(word.shifted(-start_s) for word in message.words)
                case SegmentEnd() if self._segment is not None:
                    segment, self._segment = self._segment, None
                    return segment.piece(b"", last=True)
                case Flushed():
                    self._spoken = True
                    return None
                case Error():
                    raise _remote_error(message)
                case ConfigAck():
                    continue
                case _:
                    raise ProtocolError(f"unexpected message from the TTS server during a turn: {message}")

    async def _guard(self, step: Awaitable[T]) -> T:
        """One step of the turn on the connection; a lost connection is remembered for the next turn."""
        try:
            return await step
        except ConnectionLostError as exc:
            self._broken = exc.message
            raise

    async def aclose(self) -> None:
        """Barge-in (or clean-up): cancel the turn on the server and wait until it says so."""
        if self._spoken or self._broken is not None:
            return
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                await self._client.cancel()
                while not isinstance(await self._client.receive(), Cancelled):
                    pass  # the cancelled turn's last frames and messages
        except (KoeError, TimeoutError) as exc:
            reason = exc.code if isinstance(exc, KoeError) else "timed out"  # a message may quote the text
            logger.warning(
                "TTS session %s did not acknowledge a cancel (%s); dropping it", self._client.url, reason
            )
            self._broken = f"a cancel was not acknowledged ({exc or 'timed out'})"
        self._spoken = True

    @property
    def broken(self) -> str | None:
        """Why the connection cannot serve another turn; ``None`` while it can."""
        return self._broken


class RemoteSession:
    """One agent session's connection to the TTS, opened on the first turn, reopened once it broke."""

    def __init__(self, target: TtsTarget) -> None:
        self._target = target
        self._client: StreamClient | None = None
        self._last: RemoteTurn | None = None

    async def turn(self, voice: str, speed: float, lang: str | None = None) -> RemoteTurn:
        """Open the next turn with ``voice``, ``speed`` and ``lang`` (sent as a ``config``, acknowledged).

        Raises:
            UpstreamError: the TTS cannot be reached, refused the connection, or did not acknowledge.
            Whatever the server reported about the config (an unknown voice...).
        """
        reconnected: str | None = None
        if self._last is not None and self._last.broken is not None:
            reconnected = self._last.broken
            await self.aclose()
        reused = self._client is not None
        try:
            client = await self._configured(voice, speed, lang)
        except ConnectionLostError as exc:
            await self.aclose()
            if not reused:
                raise
            reconnected = exc.message  # it closed since the last turn: one new connection is worth a try
            client = await self._configured(voice, speed, lang)
        if reconnected is not None:
            logger.info("TTS session %s reopened: %s", client.url, reconnected)
        self._last = RemoteTurn(client, reconnected)
        return self._last

    async def _configured(self, voice: str, speed: float, lang: str | None) -> StreamClient:
        if self._client is None:
            self._client = await self._target.connect(**_STREAM_OPTIONS)
        client = self._client
        try:
            await client.configure(voice=voice, speed=speed, lang=lang)
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                while True:
                    reply = await client.receive()
                    if isinstance(reply, ConfigAck):
                        return client
                    if isinstance(reply, Error):
                        raise _remote_error(reply)
        except TimeoutError as exc:
            await self.aclose()
            raise UpstreamError(
                f"the TTS at {client.url} did not acknowledge a config within {REPLY_TIMEOUT_S:g} s"
            ) from exc

    async def aclose(self) -> None:
        """Close the connection (the next turn opens a new one); idempotent."""
        self._last = None
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def remote_voices(target: TtsTarget, timeout_s: float = 10.0) -> list[str]:
    """The voice names the TTS offers ([] if a koe server cannot say, logged).

    A koe server lists them at ``GET /v1/audio/voices``. A SageMaker endpoint routes only the model's own
    paths, so its voices are those koe's image installs: every English voice.

    Raises:
        ConfigError: the server refused the API key (the agent would fail every turn).
    """
    if isinstance(target, SageMakerTarget):
        from koe.engine.voices import ENGLISH_VOICES

        return list(ENGLISH_VOICES)
    import httpx

    url = target.voices_url
    try:
        response = httpx.get(url, timeout=timeout_s, headers=auth_headers(target.api_key))
        if response.status_code == _HTTP_UNAUTHORIZED:
            raise ConfigError(
                f"the TTS server at {url} refused the API key: set KOE_API_KEY or --tts-api-key to its key",
                code="unauthorized",
            )
        response.raise_for_status()
        return [str(voice["id"]) for voice in response.json()["voices"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        logger.warning("could not list the TTS voices at %s (%s); offering the default only", url, exc)
        return []


class RemoteSpeaker:
    """A koe TTS reached over its streaming protocol, directly or through SageMaker.

    Args:
        target: where the TTS is (:func:`koe.client.target.parse_target`).
        voices: the voice names offered to clients (the TTS validates them).
    """

    ready = True

    def __init__(self, target: TtsTarget, voices: list[str]) -> None:
        self._target = target
        self._voices = voices

    def admitted(self, transport: str) -> AbstractContextManager[object]:
        """Nothing to hold here: the remote server admits each session's WebSocket itself."""
        return nullcontext()

    def voices(self) -> list[str]:
        return list(self._voices)

    async def session(self) -> RemoteSession:
        return RemoteSession(self._target)
