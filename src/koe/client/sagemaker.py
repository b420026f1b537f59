"""The SageMaker transport: ``InvokeEndpointWithBidirectionalStream`` through AWS's HTTP/2 SDK.

A thin adapter: koe's frames become payload parts (requests marked ``UTF8``, so the container receives
text frames; audio comes back as binary parts) on SageMaker's streaming endpoint, port 8443, signed with
SigV4 by the SDK. The SDK (``aws-sdk-sagemaker-runtime-http2``, extra ``koe[sagemaker]``) needs
Python ≥ 3.12, so it is imported only when a session is opened; the rest of koe never needs it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from koe.errors import UpstreamError

#: SageMaker's runtime endpoint for bidirectional streams (HTTP/2, its own port).
STREAMING_PORT = 8443
#: How the container should read a request part: as a WebSocket text frame.
TEXT = "UTF8"


def endpoint_uri(region: str) -> str:
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{STREAMING_PORT}"


def model_query_string(**options: str | float | int | None) -> str | None:
    """Session options as the query the container sees on its WebSocket URL (``None`` when empty)."""
    return urlencode({k: v for k, v in options.items() if v is not None}) or None


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
        raise UpstreamError(f"the SageMaker stream failed: {event.value}")
    raise UpstreamError(f"unexpected event on the SageMaker stream: {type(event).__name__}")


class SageMakerTransport:
    """Frames over one bidirectional stream to a SageMaker endpoint."""

    def __init__(self, stream: Any, url: str) -> None:
        self._stream = stream
        self._events: Any = None
        self._closed = False
        self.url = url

    @classmethod
    async def open(
        cls, endpoint_name: str, region: str, *, target_variant: str | None = None, **options: Any
    ) -> SageMakerTransport:
        """Start the stream; credentials come from the standard AWS chain (environment, profile, role).

        Raises:
            UpstreamError: the SDK is not installed, or the stream could not be started.
        """
        try:
            from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
            from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
            from aws_sdk_sagemaker_runtime_http2.models import InvokeEndpointWithBidirectionalStreamInput
        except ModuleNotFoundError as exc:
            raise UpstreamError(
                "the SageMaker transport needs Python >= 3.12 and `pip install 'koe[sagemaker]'`"
            ) from exc
        uri = endpoint_uri(region)
        try:
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(region=region, endpoint_uri=uri)
            client = AsyncSageMakerRuntimeHTTP2Client(config=config)
            stream = await client.invoke_endpoint_with_bidirectional_stream(
                InvokeEndpointWithBidirectionalStreamInput(
                    endpoint_name=endpoint_name,
                    target_variant=target_variant,
                    model_query_string=model_query_string(**options),
                )
            )
        except Exception as exc:  # the SDK's errors share no base class we could name here
            raise UpstreamError(
                f"cannot open a stream to endpoint {endpoint_name} in {region}: {exc}"
            ) from exc
        return cls(stream, f"{uri}/endpoints/{endpoint_name}")

    async def send_text(self, text: str) -> None:
        try:
            await self._stream.input_stream.send(request_event(text))
        except Exception as exc:  # the SDK's errors share no base class we could name here
            raise UpstreamError(f"cannot send on the SageMaker stream {self.url}: {exc}") from exc

    async def receive(self) -> str | bytes:
        if self._events is None:
            _output, self._events = await self._stream.await_output()
        event = await self._events.receive()
        if event is None:
            raise UpstreamError(f"the SageMaker stream {self.url} ended")
        return frame_of(event)

    async def aclose(self) -> None:
        """End both directions of the stream; idempotent."""
        if not self._closed:
            self._closed = True
            await self._stream.close()
