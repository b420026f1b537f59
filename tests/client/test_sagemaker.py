"""The SageMaker transport: what can run without the SDK here, and the adapter against the SDK's own classes
where it imports (it needs Python >= 3.12; this machine has 3.11, so those tests skip here).

Not run anywhere offline: a real ``InvokeEndpointWithBidirectionalStream`` (needs an endpoint and AWS
credentials). The session logic it feeds is the one ``test_stream_client.py`` runs over a real WebSocket.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from urllib.parse import parse_qs

import pytest

from koe.client.sagemaker import endpoint_uri, model_query_string
from koe.client.session import StreamClient
from koe.errors import UpstreamError

SDK = "aws_sdk_sagemaker_runtime_http2"
HAS_SDK = importlib.util.find_spec(SDK) is not None
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
needs_sdk = pytest.mark.skipif(
    not HAS_SDK,
    reason=f"aws-sdk-sagemaker-runtime-http2 needs Python >= 3.12 (this is {PYTHON}) and koe[sagemaker]",
)


def test_streams_go_to_the_regional_runtime_on_port_8443() -> None:
    assert endpoint_uri("eu-west-1") == "https://runtime.sagemaker.eu-west-1.amazonaws.com:8443"


def test_session_options_travel_as_the_model_query_string() -> None:
    query = model_query_string(voice="af_bella(2)+af_sky", speed=1.2, format="pcm", lang=None)
    assert query is not None
    assert parse_qs(query) == {"voice": ["af_bella(2)+af_sky"], "speed": ["1.2"], "format": ["pcm"]}
    assert model_query_string() is None


@pytest.mark.skipif(HAS_SDK, reason="the SDK is installed: opening would contact AWS")
def test_without_the_sdk_opening_says_what_to_install() -> None:
    async def main() -> None:
        await StreamClient.connect_sagemaker("koe", "us-east-1")

    with pytest.raises(UpstreamError, match=r"Python >= 3\.12 and `pip install 'koe\[sagemaker\]'`"):
        asyncio.run(main())


@needs_sdk
def test_text_is_sent_as_a_utf8_payload_part() -> None:
    from aws_sdk_sagemaker_runtime_http2.models import RequestStreamEventPayloadPart

    from koe.client.sagemaker import request_event

    event = request_event('{"type":"append","text":"héllo"}')
    assert isinstance(event, RequestStreamEventPayloadPart)
    assert event.value.data_type == "UTF8"
    assert event.value.bytes_ == '{"type":"append","text":"héllo"}'.encode()


@needs_sdk
def test_response_parts_become_text_or_audio_frames() -> None:
    from aws_sdk_sagemaker_runtime_http2.models import ResponsePayloadPart, ResponseStreamEventPayloadPart

    from koe.client.sagemaker import frame_of

    text = ResponseStreamEventPayloadPart(
        value=ResponsePayloadPart(bytes_=b'{"type":"cancelled","turn":1}', data_type="UTF8")
    )
    audio = ResponseStreamEventPayloadPart(value=ResponsePayloadPart(bytes_=b"\x01\x02", data_type="BINARY"))
    assert frame_of(text) == '{"type":"cancelled","turn":1}'
    assert frame_of(audio) == b"\x01\x02"


@needs_sdk
def test_model_stream_errors_become_upstream_errors() -> None:
    from aws_sdk_sagemaker_runtime_http2.models import ModelStreamError, ResponseStreamEventModelStreamError

    from koe.client.sagemaker import frame_of

    with pytest.raises(UpstreamError, match="the SageMaker stream failed"):
        frame_of(ResponseStreamEventModelStreamError(value=ModelStreamError(message="container crashed")))
