"""TTS URLs: a koe server (``ws://``, ``http://``) or a SageMaker endpoint (``sagemaker://``), parsed without
I/O so that a malformed one fails when ``koe agent`` starts."""

from __future__ import annotations

import pytest

from koe.client.target import SageMakerTarget, WebSocketTarget, parse_target
from koe.errors import ConfigError

KEY = "a-key-of-the-tts-server-0123"


@pytest.mark.parametrize(
    ("url", "voices"),
    [
        ("ws://tts:8080", "http://tts:8080/v1/audio/voices"),
        ("wss://tts.example/v1/stream", "https://tts.example/v1/audio/voices"),
        ("http://tts:8080", "http://tts:8080/v1/audio/voices"),
        ("https://tts.example", "https://tts.example/v1/audio/voices"),
    ],
)
def test_a_koe_server_url_keeps_its_host_and_lists_voices_beside_the_stream(url: str, voices: str) -> None:
    target = parse_target(url, environ={})
    assert target == WebSocketTarget(url, None)
    assert isinstance(target, WebSocketTarget) and target.voices_url == voices


def test_the_api_key_comes_from_the_flag_else_koe_api_key_and_is_never_shown() -> None:
    from_env = parse_target("ws://tts:8080", environ={"KOE_API_KEY": KEY})
    assert isinstance(from_env, WebSocketTarget) and from_env.api_key == KEY
    flag = parse_target("ws://tts:8080", api_key="another-key-0123456789", environ={"KOE_API_KEY": KEY})
    assert isinstance(flag, WebSocketTarget) and flag.api_key == "another-key-0123456789"
    assert KEY not in repr(from_env) and KEY not in from_env.describe()
    assert "with its API key" in from_env.describe()


def test_a_key_that_cannot_travel_in_a_header_is_refused() -> None:
    with pytest.raises(ConfigError, match="printable ASCII"):
        parse_target("ws://tts:8080", api_key="two\r\nlines")


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("sagemaker://koe?region=eu-west-1", {}, SageMakerTarget("koe", "eu-west-1")),
        (
            "sagemaker://koe-tts?region=us-east-1&variant=gpu",
            {},
            SageMakerTarget("koe-tts", "us-east-1", "gpu"),
        ),
        ("sagemaker://koe", {"AWS_REGION": "ap-southeast-2"}, SageMakerTarget("koe", "ap-southeast-2")),
        ("sagemaker://koe", {"AWS_DEFAULT_REGION": "us-gov-west-1"}, SageMakerTarget("koe", "us-gov-west-1")),
        (
            "sagemaker://koe/?region=eu-west-1",
            {"AWS_REGION": "us-east-1"},
            SageMakerTarget("koe", "eu-west-1"),
        ),
    ],
    ids=["region", "variant", "AWS_REGION", "AWS_DEFAULT_REGION", "query-wins"],
)
def test_a_sagemaker_url_names_the_endpoint_its_region_and_variant(
    url: str, environ: dict[str, str], expected: SageMakerTarget
) -> None:
    assert parse_target(url, environ=environ) == expected


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sagemaker://koe", "names no region"),
        ("sagemaker://koe?region=", "AWS region like us-east-1"),
        ("sagemaker://koe?region=mars", "AWS region like us-east-1"),
        ("sagemaker://koe?region=us-east-1&region=eu-west-1", "once each"),
        ("sagemaker://koe?region=us-east-1&voice=af_heart", "once each"),
        ("sagemaker://koe?region", "cannot read the query"),
        ("sagemaker://koe_tts?region=us-east-1", "letters, digits and hyphens"),
        ("sagemaker://-koe?region=us-east-1", "letters, digits and hyphens"),
        ("sagemaker://koe/invocations?region=us-east-1", "letters, digits and hyphens"),
        ("sagemaker://?region=us-east-1", "letters, digits and hyphens"),
        ("sagemaker://koe?region=us-east-1&variant=a_b", "production variant name"),
        ("ftp://tts:8080", "expected a TTS URL"),
        ("tts:8080", "expected a TTS URL"),
        ("ws://", "expected a TTS URL"),
    ],
)  # fmt: skip
def test_a_malformed_url_says_what_was_expected(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as error:
        parse_target(url, environ={})
    assert error.value.code == "invalid_field"


def test_sagemaker_signs_its_requests_so_an_explicit_key_is_a_mistake_and_koe_api_key_is_ignored() -> None:
    with pytest.raises(ConfigError, match="SageMaker signs requests with SigV4"):
        parse_target("sagemaker://koe?region=us-east-1", api_key=KEY)
    assert parse_target("sagemaker://koe?region=us-east-1", environ={"KOE_API_KEY": KEY}) == SageMakerTarget(
        "koe", "us-east-1"
    )
