"""One streaming session with a koe server, over any transport that moves text and binary frames.

The transports (``websocket``: a plain WebSocket; ``sagemaker``: ``InvokeEndpointWithBidirectionalStream``)
only move frames. Everything else — encoding requests, decoding replies, a turn's lifetime, cancel — is
here, once, so the SageMaker path runs the same tested code as the WebSocket one. This module knows the
transports only as :class:`Transport`: each transport module opens its connection and builds the session
(its ``connect``), so the imports run one way, from the transports to the session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any, Protocol

from koe.errors import UpstreamError
from koe.wire.messages import (
    Append,
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    Configure,
    Dialect,
    Error,
    Flush,
    Flushed,
    ServerMessage,
    SessionOptions,
    decode,
    encode_request,
)


class Transport(Protocol):
    """Moves frames; ``receive`` raises ``ConnectionLostError`` once the connection is closed (an
    ``UpstreamError`` when it was refused)."""

    url: str

    async def send_text(self, text: str) -> None: ...

    async def receive(self) -> str | bytes: ...

    async def aclose(self) -> None: ...


class StreamClient:
    """A koe session: send text as it is written, receive audio as it is spoken.

    Opened by :func:`koe.client.websocket.connect` (a koe server) or :func:`koe.client.sagemaker.connect`
    (a SageMaker endpoint). One task receives at a time (``receive`` or ``stream``); ``cancel`` may be
    called from any other task.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._feeder: asyncio.Task[None] | None = None
        # every cancel gets one ``cancelled`` reply; counting both tells a stale reply from this turn's
        self._cancels_sent = 0
        self._cancels_seen = 0
        self.url = transport.url

    async def send(self, message: ClientMessage | dict[str, Any]) -> None:
        """Send one message: a protocol dataclass, or a JSON object for other dialects (the AWS sample's
        ``{"text": ...}``).

        Raises:
            UpstreamError: the connection is closed.
        """
        text = (
            json.dumps(message, ensure_ascii=False) if isinstance(message, dict) else encode_request(message)
        )
        await self._transport.send_text(text)

    async def append(self, text: str) -> None:
        await self.send(Append(text, Dialect.KOE))

    async def flush(self) -> None:
        await self.send(Flush(Dialect.KOE))

    async def configure(self, **options: Any) -> None:
        await self.send(Configure(SessionOptions(**options)))

    async def close(self) -> None:
        """Ask the server to speak what is pending, then close the session."""
        await self.send(Close(Dialect.KOE))

    async def cancel(self) -> None:
        """Barge-in: stop feeding the current turn and tell the server to drop it.

        The server answers ``cancelled``; a running :meth:`stream` ends there, and a later one skips the
        reply to a cancel sent between turns. Cancelling is safe.
        """
        if self._feeder is not None:
            self._feeder.cancel()
        self._cancels_sent += 1  # counted first: the reply may arrive before send() returns
        await self.send(Cancel(Dialect.KOE))

    async def receive(self) -> ServerMessage | bytes:
        """The next message, or a binary audio frame. Cancelling is safe (nothing is lost).

        Raises:
            UpstreamError: the connection closed. ProtocolError: the server sent something unreadable.
        """
        frame = await self._transport.receive()
        if isinstance(frame, bytes):
            return frame
        message = decode(frame)
        if isinstance(message, Cancelled):
            self._cancels_seen += 1
        return message

    async def stream(self, texts: AsyncIterable[str] | Iterable[str]) -> AsyncIterator[bytes]:
        """Speak one turn: ``async for audio in client.stream(llm_tokens)``.

        Each text is appended as it arrives (so speech starts at the first clause), then the turn is
        flushed. Audio is yielded until the server reports the turn ``flushed`` or ``cancelled``. Leaving
        the loop early does not stop the server: call :meth:`cancel` for that.

        Raises:
            UpstreamError: the server reported an error (its code is kept) or the connection closed.
            Whatever ``texts`` raised, once the server has cancelled the half-sent turn.
        """
        earlier_cancels = self._cancels_sent
        failure: BaseException | None = None
        feeder = self._feeder = asyncio.create_task(self._feed(texts))
        receiving: asyncio.Future[ServerMessage | bytes] = asyncio.ensure_future(self.receive())
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {receiving} if feeder.done() else {receiving, feeder}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if feeder in done and not feeder.cancelled() and feeder.exception() is not None:
                    failure = feeder.exception()
                    if isinstance(failure, UpstreamError):
                        raise failure
                    await self.cancel()  # the loop goes on until the server confirms it
                if receiving not in done:
                    continue
                message = receiving.result()
                receiving = asyncio.ensure_future(self.receive())
                if isinstance(message, Cancelled):
                    if self._cancels_seen <= earlier_cancels:
                        continue  # the reply to a cancel sent before this turn began
                    if failure is not None:
                        raise failure
                    return
                if isinstance(message, Flushed):
                    return
                if isinstance(message, Error):
                    raise UpstreamError(
                        f"the TTS server refused the turn: {message.message}", code=message.code
                    )
                if isinstance(message, bytes) and failure is None:
                    yield message
        finally:
            self._feeder = None
            for task in (feeder, receiving):
                task.cancel()
            # collected, not raised: the turn's outcome was decided above
            await asyncio.gather(feeder, receiving, return_exceptions=True)

    async def _feed(self, texts: AsyncIterable[str] | Iterable[str]) -> None:
        if isinstance(texts, AsyncIterable):
            async for text in texts:
                await self.append(text)
        else:
            for text in texts:
                await self.append(text)
        await self.flush()

    async def aclose(self) -> None:
        """Close the connection; idempotent."""
        await self._transport.aclose()
