"""``koe agent-url``: the page's link to an agent on AgentCore Runtime, presigned with SigV4 or with a JWT.

The presigned URL's signature is recomputed here from the SigV4 specification (canonical request, string
to sign, derived key) with fixed credentials: it is what AWS would verify. Whether AgentCore accepts it
needs an account and was not tried.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
import sys
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import pytest

from koe.client.agentcore import (
    MAX_EXPIRES_S,
    SESSION_PARAMETER,
    RuntimeArn,
    page_url,
    presign,
    websocket_url,
)
from koe.errors import ConfigError

ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/koe_agent-a1B2c3D4e5"
SESSION = "koe-session-of-at-least-thirty-three-characters"


class Frozen:
    access_key = "AKIDEXAMPLE"
    secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    token = "a-session-token"


class Credentials:
    def get_frozen_credentials(self) -> Frozen:
        return Frozen()


def test_the_socket_url_addresses_the_runtime_by_its_encoded_arn_and_names_a_session() -> None:
    url = websocket_url(RuntimeArn.parse(ARN), SESSION)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("wss", "bedrock-agentcore.eu-west-1.amazonaws.com")
    assert (
        parts.path == f"/runtimes/{quote(ARN, safe='')}/ws" and unquote(parts.path) == f"/runtimes/{ARN}/ws"
    )
    assert dict(parse_qsl(parts.query)) == {"qualifier": "DEFAULT", SESSION_PARAMETER: SESSION}
    fresh = dict(parse_qsl(urlsplit(websocket_url(RuntimeArn.parse(ARN))).query))[SESSION_PARAMETER]
    assert len(fresh) >= 33  # AgentCore's minimum


@pytest.mark.parametrize(
    "arn",
    ["arn:aws:bedrock:eu-west-1:123456789012:runtime/koe", "koe_agent-a1B2c3D4e5", "",
     "arn:aws:bedrock-agentcore:eu-west-1:123:runtime/koe"],
)  # fmt: skip
def test_anything_but_a_runtime_arn_is_refused(arn: str) -> None:
    with pytest.raises(ConfigError, match="expected a runtime ARN"):
        RuntimeArn.parse(arn)


def test_a_short_session_id_and_a_long_lived_url_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least 33 characters"):
        websocket_url(RuntimeArn.parse(ARN), "short")
    for expires in (0, MAX_EXPIRES_S + 1):
        with pytest.raises(ConfigError, match="1 to 300 seconds"):
            presign(
                websocket_url(RuntimeArn.parse(ARN), SESSION),
                "eu-west-1",
                expires_s=expires,
                credentials=Credentials(),
            )


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def test_the_presigned_url_carries_a_valid_sigv4_signature_for_agentcore() -> None:
    pytest.importorskip("botocore", reason="signing needs botocore: koe[sagemaker] or koe[bedrock]")
    url = websocket_url(RuntimeArn.parse(ARN), SESSION)
    signed = presign(url, "eu-west-1", expires_s=120, credentials=Credentials())
    parts = urlsplit(signed)
    assert (parts.scheme, parts.netloc, parts.path) == ("wss", *urlsplit(url)[1:3])
    query = dict(parse_qsl(parts.query))
    assert query["qualifier"] == "DEFAULT" and query[SESSION_PARAMETER] == SESSION  # signed with the rest
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and query["X-Amz-Expires"] == "120"
    assert query["X-Amz-SignedHeaders"] == "host" and query["X-Amz-Security-Token"] == Frozen.token
    key_id, day, region, service, terminator = query["X-Amz-Credential"].split("/")
    assert (key_id, region, service, terminator) == (
        "AKIDEXAMPLE",
        "eu-west-1",
        "bedrock-agentcore",
        "aws4_request",
    )

    # the signature, from the specification: canonical request (the path encoded once more, as for every
    # service but S3; the hash of the empty body) -> string to sign -> derived key
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(query.items())
        if k != "X-Amz-Signature"
    )
    canonical_request = "\n".join(
        [
            "GET",
            quote(parts.path, safe="/~"),
            canonical_query,
            f"host:{parts.netloc}",
            "",
            "host",
            hashlib.sha256(b"").hexdigest(),
        ]
    )
    scope = f"{day}/eu-west-1/bedrock-agentcore/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            query["X-Amz-Date"],
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )
    key = _hmac(
        _hmac(_hmac(_hmac(f"AWS4{Frozen.secret_key}".encode(), day), "eu-west-1"), "bedrock-agentcore"),
        "aws4_request",
    )
    assert query["X-Amz-Signature"] == hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_the_page_link_keeps_the_agent_and_the_token_in_the_fragment() -> None:
    link = page_url("http://127.0.0.1:8080/", "wss://agent.example/ws?a=1&b=2", token="eyJ.x.y")
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path, parts.query) == ("http", "127.0.0.1:8080", "/", "")
    assert dict(parse_qsl(parts.fragment)) == {"agent": "wss://agent.example/ws?a=1&b=2", "token": "eyJ.x.y"}
    assert "token" not in dict(parse_qsl(urlsplit(page_url("http://h/", "wss://a/ws")).fragment))


def test_koe_agent_url_prints_a_presigned_page_link() -> None:
    pytest.importorskip("botocore", reason="signing needs botocore: koe[sagemaker] or koe[bedrock]")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environ |= {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    command = [sys.executable, "-m", "koe.cli", "agent-url"]
    result = subprocess.run(
        [*command, ARN, "--page", "http://localhost:8080/", "--expires", "60"],
        capture_output=True, text=True, timeout=60, env=environ, check=True,
    )  # fmt: skip
    link = urlsplit(result.stdout.strip())
    agent = dict(parse_qsl(link.fragment))["agent"]
    assert link.netloc == "localhost:8080" and agent.startswith(
        "wss://bedrock-agentcore.eu-west-1.amazonaws.com/"
    )
    assert "X-Amz-Signature=" in agent and "X-Amz-Expires=60" in agent
    refused = subprocess.run(
        [*command, "not-an-arn"], capture_output=True, text=True, timeout=60, env=environ
    )  # fmt: skip
    assert refused.returncode == 2 and "expected a runtime ARN" in refused.stderr
