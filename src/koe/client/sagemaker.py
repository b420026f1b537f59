"""The SageMaker transport: ``InvokeEndpointWithBidirectionalStream`` through AWS's HTTP/2 SDK.

A thin adapter: koe's frames become payload parts (requests marked ``UTF8``, so the container receives
text frames; audio comes back as binary parts) on SageMaker's streaming endpoint, port 8443, signed with
SigV4 by the SDK with credentials from botocore's standard chain (environment, profile, container or
instance role). The SDK (``aws-sdk-sagemaker-runtime-http2``, the ``sagemaker`` extra) needs
Python ≥ 3.12, so it is imported only when a stream is opened; the rest of koe never needs it.

Two layers. :func:`open_sdk_stream` is the only code that touches the SDK: it opens the duplex stream on
the CRT HTTP/2 client (the SDK's default aiohttp client cannot stream both ways and refuses the call) and
turns payload parts into frames. :class:`SageMakerTransport` is what the session uses: one task reads the
stream into a bounded queue (so a cancelled ``receive`` loses nothing), and every SDK failure becomes a
koe error once, here (:func:`sdk_error`). :func:`connect` opens one and builds the session on it.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlencode

from koe.client.session import StreamClient
from koe.errors import ConfigError, ConnectionLostError, KoeError, OverloadedError, UpstreamError
from koe.extras import install_hint

logger = logging.getLogger(__name__)

#: SageMaker's runtime endpoint for bidirectional streams (HTTP/2, its own port).
STREAMING_PORT = 8443
#: How the container should read a request part: as a WebSocket text frame.
TEXT = "UTF8"
#: Frames read ahead of the session; a full queue stops reading, and HTTP/2 flow control does the rest.
READ_AHEAD_FRAMES = 64
#: When SageMaker says it is overloaded without saying for how long.
RETRY_AFTER_S = 1.0
INSTALL_HINT = f"the SageMaker transport needs Python >= 3.12 and {install_hint('sagemaker')}"


def endpoint_uri(region: str) -> str:
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{STREAMING_PORT}"


def model_query_string(**options: str | float | int | None) -> str | None:
    """Session options as the query the container sees on its WebSocket URL (``None`` when empty)."""
    return urlencode({k: v for k, v in options.items() if v is not None}) or None


class FrameStream(Protocol):
    """One open bidirectional stream, in frames."""

    async def send(self, text: str) -> None: ...

    async def receive(self) -> str | bytes | None:
        """The next frame; ``None`` once the stream has ended."""
        ...

    async def close(self) -> None: ...


Opener = Callable[[str, str, "str | None", "str | None"], Awaitable[FrameStream]]


def sdk_error(exc: BaseException, doing: str) -> KoeError:
    """An SDK failure while ``doing`` something, as the koe error a client is told.

    The SDK's exceptions are recognized by class name (``ModelError``, ``ServiceUnavailableError``...), so
    this mapping runs, and is tested, where the SDK itself cannot be imported.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    status = getattr(getattr(exc, "response_metadata", None), "http_status_code", None)
    if names & {"UnsupportedTransportError", "MissingDependencyError"}:
        return ConfigError(f"{INSTALL_HINT} (the CRT HTTP/2 client): {detail}", code="missing_extra")
    if "SmithyIdentityError" in names:
        return UpstreamError(
            f"no AWS credentials to sign {doing} (looked in the environment, the profile, and the "
            f"container and instance roles): {detail}"
        )
    if "ServiceUnavailableError" in names or getattr(exc, "is_throttling_error", False):
        retry_after = getattr(exc, "retry_after", None) or RETRY_AFTER_S
        return OverloadedError(
            f"SageMaker is overloaded or the endpoint is scaling ({doing}): {detail}",
            code="tts_unavailable",
            retry_after_s=retry_after,
        )
    if status == 403 or "AccessDenied" in detail:
        return UpstreamError(
            f"SageMaker refused {doing}: {detail} (the role needs "
            "sagemaker:InvokeEndpointWithBidirectionalStream on this endpoint)"
        )
    if "InputValidationError" in names:
        return UpstreamError(
            f"SageMaker rejected {doing}: {detail} (check the endpoint name, region and variant)"
        )
    if "ModelError" in names:
        code = getattr(exc, "original_status_code", None)
        message = getattr(exc, "original_message", None) or detail
        return UpstreamError(f"the koe container answered {doing} with {code}: {message}")
    if names & {"ModelStreamError", "InternalStreamFailure"}:
        return ConnectionLostError(f"the SageMaker stream failed during {doing}: {detail}")
    return UpstreamError(f"SageMaker failed during {doing}: {type(exc).__name__}: {detail}")


class SageMakerTransport:
    """Frames over one bidirectional stream to a SageMaker endpoint."""

    def __init__(self, stream: FrameStream, url: str) -> None:
        self._stream = stream
        self._frames: asyncio.Queue[str | bytes | KoeError] = asyncio.Queue(READ_AHEAD_FRAMES)
        self._reader = asyncio.get_running_loop().create_task(self._read(), name=f"koe-sagemaker {url}")
        self._closed = False
        self.url = url

    @classmethod
    async def open(
        cls,
        endpoint_name: str,
        region: str,
        *,
        target_variant: str | None = None,
        opener: Opener | None = None,
        **options: Any,
    ) -> SageMakerTransport:
        """Start the stream; ``options`` (voice, format, ...) travel as the model query string.

        Raises:
            ConfigError: the SDK or its HTTP/2 client is not installed. UpstreamError: the stream could not
            be started (no credentials, unknown endpoint...).
        """
        url = f"{endpoint_uri(region)}/endpoints/{endpoint_name}"
        start = opener or open_sdk_stream
        try:
            stream = await start(endpoint_name, region, target_variant, model_query_string(**options))
        except KoeError:
            raise
        except Exception as exc:  # the SDK's errors share no base class we could name here
            raise sdk_error(exc, f"opening a stream to {url}") from exc
        return cls(stream, url)

    async def _read(self) -> None:
        """Move frames from the stream to the queue; an ending or a failure is queued last."""
        while True:
            try:
                frame = await self._stream.receive()
            except KoeError as exc:
                await self._frames.put(exc)
                return
            except Exception as exc:  # the SDK's errors share no base class we could name here
                await self._frames.put(sdk_error(exc, f"reading the stream {self.url}"))
                return
            if frame is None:
                await self._frames.put(ConnectionLostError(f"the SageMaker stream {self.url} ended"))
                return
            await self._frames.put(frame)

    async def send_text(self, text: str) -> None:
        if self._closed:
            raise ConnectionLostError(f"the SageMaker stream {self.url} is closed")
        try:
            await self._stream.send(text)
        except Exception as exc:  # the SDK's errors share no base class we could name here
            error = sdk_error(exc, f"sending on the stream {self.url}")
            if type(error) is UpstreamError:  # a stream that cannot take a frame is gone: reopening may help
                error = ConnectionLostError(error.message)
            raise error from exc

    async def receive(self) -> str | bytes:
        """The next frame. Cancelling is safe: frames wait in the queue for the next call."""
        item = await self._frames.get()
        if isinstance(item, KoeError):
            self._frames.put_nowait(item)  # every later call learns the same: the stream is over
            raise item
        return item

    async def aclose(self) -> None:
        """End both directions of the stream; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        try:
            await self._stream.close()
        except Exception:  # closing a failed stream may fail again; nothing is left to release
            logger.debug("closing the SageMaker stream %s failed", self.url, exc_info=True)


async def connect(
    endpoint_name: str, region: str, *, target_variant: str | None = None, **options: Any
) -> StreamClient:
    """A session through SageMaker's bidirectional stream (needs the ``sagemaker`` extra, Python ≥ 3.12).

    ``options`` (voice, speed, format, sample_rate, lang) travel as the model query string. Credentials
    come from the standard AWS chain; requests are signed with SigV4.

    Raises:
        ConfigError: the SDK is missing. UpstreamError: the endpoint cannot be reached.
    """
    transport = await SageMakerTransport.open(endpoint_name, region, target_variant=target_variant, **options)
    return StreamClient(transport)


# --- the SDK ---------------------------------------------------------------------------------------------


def request_event(text: str) -> Any:
    """One koe message as the SDK's request event: a ``UTF8`` payload part."""
    from aws_sdk_sagemaker_runtime_http2.models import RequestPayloadPart, RequestStreamEventPayloadPart

    return RequestStreamEventPayloadPart(
        value=RequestPayloadPart(bytes_=text.encode("utf-8"), data_type=TEXT)
    )


def frame_of(event: Any) -> str | bytes:
    """A response event as the frame the container sent: text for ``UTF8`` parts, audio bytes otherwise.

    Raises:
        UpstreamError: the event reports a model or stream failure, or is of a kind this SDK does not know.
    """
    from aws_sdk_sagemaker_runtime_http2.models import (
        ResponseStreamEventInternalStreamFailure,
        ResponseStreamEventModelStreamError,
        ResponseStreamEventPayloadPart,
    )

    if isinstance(event, ResponseStreamEventPayloadPart):
        data = event.value.bytes_ or b""
        return data.decode("utf-8") if event.value.data_type == TEXT else data
    if isinstance(event, ResponseStreamEventModelStreamError | ResponseStreamEventInternalStreamFailure):
        raise sdk_error(event.value, "the stream")
    raise UpstreamError(f"unexpected event on the SageMaker stream: {type(event).__name__}")


class _SdkFrames:
    """The SDK's duplex event stream, in frames."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._events: Any = None

    async def send(self, text: str) -> None:
        await self._stream.input_stream.send(request_event(text))

    async def receive(self) -> str | bytes | None:
        if self._events is None:
            _output, self._events = await self._stream.await_output()
        event = await self._events.receive()
        return None if event is None else frame_of(event)

    async def close(self) -> None:
        await self._stream.close()


class BotocoreCredentials:
    """SigV4 credentials from botocore's standard chain, for the SDK to sign with.

    The chain every AWS tool uses: environment, shared config and credentials files, SSO, web identity,
    the container provider (ECS, EKS, AgentCore Runtime's execution role) and the instance role. The SDK's
    own chain (0.12.0) stops at the environment and the shared files unless further packages are
    installed, so a deployed agent would find no role. botocore refreshes temporary credentials itself.
    """

    def __init__(self, session: Any = None) -> None:
        if session is None:
            import botocore.session

            session = botocore.session.get_session()
        self._session = session

    def frozen(self) -> Any:
        """The current credentials (may call a credentials endpoint: run it off the event loop).

        Raises:
            UpstreamError: the chain found none.
        """
        credentials = self._session.get_credentials()
        if credentials is None:
            raise UpstreamError(
                "no AWS credentials to sign SageMaker requests with (looked in the environment, the "
                "shared files, and the container and instance roles)"
            )
        return credentials.get_frozen_credentials()

    async def get_identity(self, *, properties: Any) -> Any:
        from smithy_aws_core.identity import AWSCredentialsIdentity

        frozen = await asyncio.to_thread(self.frozen)
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key,
            secret_access_key=frozen.secret_key,
            session_token=frozen.token,
        )

    async def invalidate(self) -> None:
        """Nothing cached here: botocore decides when to refresh."""


async def sdk_config(region: str) -> Any:
    """The SDK's client configuration: ``region``'s streaming endpoint, the CRT HTTP/2 client, and SigV4
    (the SDK's default for this service) with credentials from botocore's standard chain.

    Raises:
        ConfigError: the SDK or ``awscrt`` is missing.
    """
    try:
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
        from smithy_http.aio.crt import AWSCRTHTTPClient
    except ModuleNotFoundError as exc:
        raise ConfigError(INSTALL_HINT, code="missing_extra") from exc
    return await AsyncSageMakerRuntimeHTTP2Config.resolve(
        region=region,
        endpoint_uri=endpoint_uri(region),
        transport=AWSCRTHTTPClient(),
        aws_credentials_identity_resolver=BotocoreCredentials(),
    )


#: One SDK client per event loop and Region: its HTTP/2 connections and CRT threads serve every stream.
_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = weakref.WeakKeyDictionary()


async def _client(region: str) -> Any:
    clients = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    if region not in clients:
        config = await sdk_config(region)
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client

        clients[region] = AsyncSageMakerRuntimeHTTP2Client(config=config)
    return clients[region]


async def open_sdk_stream(
    endpoint_name: str, region: str, target_variant: str | None, query: str | None
) -> FrameStream:
    """Open ``InvokeEndpointWithBidirectionalStream`` on the CRT HTTP/2 client, signed with SigV4.

    Raises:
        ConfigError: the SDK or ``awscrt`` is missing. Whatever the SDK raises on the call itself.
    """
    client = await _client(region)
    from aws_sdk_sagemaker_runtime_http2.models import InvokeEndpointWithBidirectionalStreamInput

    stream = await client.invoke_endpoint_with_bidirectional_stream(
        InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=endpoint_name, target_variant=target_variant, model_query_string=query
        )
    )
    return _SdkFrames(stream)
