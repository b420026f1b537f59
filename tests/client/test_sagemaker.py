"""The SageMaker transport: what runs without the SDK here, and the adapter against the SDK's own classes
where it imports (it needs Python >= 3.12; this machine has 3.11, so those tests skip here).

Not run anywhere offline: a real ``InvokeEndpointWithBidirectionalStream`` (needs an endpoint and AWS
credentials). The message flow above the SDK — the read-ahead queue, error mapping, the session — runs in
``tests/agent/test_remote.py`` against a live koe container path, with only the SDK call replaced.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from urllib.parse import parse_qs

import pytest

from koe.client.sagemaker import BotocoreCredentials, connect, endpoint_uri, model_query_string, sdk_error
from koe.errors import ConfigError, ConnectionLostError, OverloadedError, UpstreamError
from koe.extras import install_hint

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
        await connect("koe", "us-east-1")

    with pytest.raises(ConfigError) as error:
        asyncio.run(main())
    assert f"Python >= 3.12 and {install_hint('sagemaker')}" in error.value.message
    assert error.value.code == "missing_extra"


# --- the SDK's failures as koe errors (recognized by class name, so this runs without the SDK) ------------


class Metadata:
    def __init__(self, status: int) -> None:
        self.http_status_code = status


class SmithyError(Exception):
    def __init__(self, message: str = "", **fields: object) -> None:
        super().__init__(message)
        self.message = message
        for name, value in fields.items():
            setattr(self, name, value)


class SmithyIdentityError(SmithyError): ...


class IdentityChainError(SmithyIdentityError): ...


class UnsupportedTransportError(SmithyError): ...


class CallError(SmithyError): ...


class ServiceUnavailableError(CallError): ...


class InputValidationError(CallError): ...


class ModelError(CallError): ...


class ModelStreamError(CallError): ...


@pytest.mark.parametrize(
    ("failure", "kind", "code", "says"),
    [
        (IdentityChainError("no provider found"), UpstreamError, "upstream_error", "no AWS credentials"),
        (UnsupportedTransportError("aiohttp"), ConfigError, "missing_extra", install_hint("sagemaker")),
        (ServiceUnavailableError("scaling"), OverloadedError, "tts_unavailable", "endpoint is scaling"),
        (CallError("slow down", is_throttling_error=True), OverloadedError, "tts_unavailable", "overloaded"),
        (
            CallError("User is not authorized", response_metadata=Metadata(403)),
            UpstreamError, "upstream_error", "sagemaker:InvokeEndpointWithBidirectionalStream",
        ),
        (InputValidationError("Endpoint koe not found"), UpstreamError, "upstream_error", "check the"),
        (
            ModelError("x", original_status_code=400, original_message="unknown voice"),
            UpstreamError, "upstream_error", "answered opening a stream with 400: unknown voice",
        ),
        (ModelStreamError("container crashed"), ConnectionLostError, "upstream_error", "container crashed"),
        (RuntimeError("boom"), UpstreamError, "upstream_error", "RuntimeError: boom"),
    ],
    ids=["credentials", "transport", "unavailable", "throttled", "denied", "validation", "model", "stream",
         "other"],
)  # fmt: skip
def test_sdk_failures_become_koe_errors_that_say_what_to_do(
    failure: Exception, kind: type[Exception], code: str, says: str
) -> None:
    error = sdk_error(failure, "opening a stream")
    assert type(error) is kind and error.code == code
    assert says in error.message


def test_overloaded_keeps_the_services_retry_after() -> None:
    error = sdk_error(ServiceUnavailableError("busy", retry_after=7.5), "opening a stream")
    assert isinstance(error, OverloadedError) and error.retry_after_s == 7.5


# --- credentials: botocore's standard chain --------------------------------------------------------------


def isolate(monkeypatch: pytest.MonkeyPatch, **environ: str) -> None:
    """Only ``environ`` as credentials: no shared files, no instance metadata, no container endpoint."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, value in environ.items():
        monkeypatch.setenv(name, value)


def test_signing_credentials_come_from_botocores_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore", reason="botocore comes with koe[sagemaker] (and koe[bedrock])")
    isolate(monkeypatch, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret")
    frozen = BotocoreCredentials().frozen()
    assert (frozen.access_key, frozen.secret_key, frozen.token) == ("AKIDEXAMPLE", "secret", None)


def test_no_credentials_anywhere_says_where_it_looked(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("botocore", reason="botocore comes with koe[sagemaker] (and koe[bedrock])")
    isolate(monkeypatch)
    with pytest.raises(UpstreamError, match="container and instance roles"):
        BotocoreCredentials().frozen()


# --- against the SDK itself ------------------------------------------------------------------------------


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
def test_model_stream_errors_become_lost_connections() -> None:
    from aws_sdk_sagemaker_runtime_http2.models import ModelStreamError, ResponseStreamEventModelStreamError

    from koe.client.sagemaker import frame_of

    with pytest.raises(ConnectionLostError, match="container crashed"):
        frame_of(ResponseStreamEventModelStreamError(value=ModelStreamError(message="container crashed")))


@needs_sdk
def test_the_sdks_own_errors_map_as_their_names_say() -> None:
    from aws_sdk_sagemaker_runtime_http2.models import ModelError, ServiceUnavailableError

    assert isinstance(sdk_error(ServiceUnavailableError(message="busy"), "x"), OverloadedError)
    model = sdk_error(ModelError(message="x", original_status_code=400, original_message="bad voice"), "x")
    assert "400: bad voice" in model.message


@needs_sdk
def test_the_client_signs_with_sigv4_for_sagemaker_on_a_duplex_http2_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No request is sent: the resolved configuration is what the SDK would sign and send with."""
    from smithy_core.shapes import ShapeID

    from koe.client.sagemaker import sdk_config

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = asyncio.run(sdk_config("eu-west-1"))
    assert config.region == "eu-west-1"
    assert str(config.endpoint_uri) == "https://runtime.sagemaker.eu-west-1.amazonaws.com:8443"
    assert config.transport.SUPPORTS_DUPLEX_STREAMING is True  # the CRT client: both ways at once
    sigv4 = config.auth_schemes[ShapeID("aws.auth#sigv4")]
    assert sigv4._service == "sagemaker"  # the scheme keeps its service name private
    # no credentials in the configuration: botocore's chain finds them when the SDK signs
    assert config.aws_access_key_id is None
    assert isinstance(config.aws_credentials_identity_resolver, BotocoreCredentials)


@needs_sdk
def test_the_sdk_gets_botocores_credentials_as_its_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(
        monkeypatch, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret", AWS_SESSION_TOKEN="t"
    )
    identity = asyncio.run(BotocoreCredentials().get_identity(properties={}))
    assert (identity.access_key_id, identity.secret_access_key, identity.session_token) == (
        "AKIDEXAMPLE", "secret", "t",
    )  # fmt: skip
