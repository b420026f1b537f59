"""Reaching a deployed agent on Bedrock AgentCore Runtime from a browser (``koe agent-url``).

A browser's WebSocket can set no headers, so AgentCore takes its credentials in the URL or the
subprotocols: with IAM auth (the default) a SigV4-presigned ``wss://`` URL, valid for at most 300 seconds
(long enough to open the socket, which then stays open); with a JWT authorizer the token, base64url
encoded, as the subprotocol ``base64UrlBearerAuthorization.<token>`` beside the sentinel
``base64UrlBearerAuthorization`` (the page does that itself from ``#token=``).

Signing uses botocore's standard credential chain (the ``sagemaker`` or the ``bedrock`` extra brings it); the
signer needs ``bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream`` on the runtime (the CDK stack's
``InvokeAgentPolicyArn`` output).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from koe.errors import ConfigError, UpstreamError
from koe.extras import install_hint

SERVICE = "bedrock-agentcore"
#: AgentCore refuses presigned URLs that live longer.
MAX_EXPIRES_S = 300
SESSION_PARAMETER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
#: AgentCore's shortest session id.
MIN_SESSION_CHARS = 33
DEFAULT_QUALIFIER = "DEFAULT"
_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):bedrock-agentcore:(?P<region>[a-z]{2}(-[a-z]+)+-\d{1,2}):"
    r"(?P<account>\d{12}):runtime/[a-zA-Z][a-zA-Z0-9_-]{0,99}$"
)
_DNS_SUFFIX = {"aws": "amazonaws.com", "aws-cn": "amazonaws.com.cn", "aws-us-gov": "amazonaws.com"}


@dataclass(frozen=True, slots=True)
class RuntimeArn:
    """An AgentCore runtime, as its ARN names it."""

    arn: str
    partition: str
    region: str

    @classmethod
    def parse(cls, arn: str) -> RuntimeArn:
        """Raises ``ConfigError`` when ``arn`` is not a runtime's."""
        match = _ARN.match(arn.strip())
        if match is None:
            raise ConfigError(
                "expected a runtime ARN like arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/"
                f"koe_agent-a1B2c3D4e5 (the stack's AgentRuntimeArn output), got {arn!r}",
                code="invalid_field",
            )
        return cls(arn.strip(), match["partition"], match["region"])

    @property
    def host(self) -> str:
        return f"{SERVICE}.{self.region}.{_DNS_SUFFIX.get(self.partition, 'amazonaws.com')}"


def websocket_url(
    runtime: RuntimeArn, session_id: str | None = None, qualifier: str = DEFAULT_QUALIFIER
) -> str:
    """The runtime's ``/ws`` URL for one conversation (a new session id unless given).

    Raises:
        ConfigError: a session id shorter than AgentCore accepts.
    """
    session = session_id or f"koe-{uuid.uuid4()}"
    if len(session) < MIN_SESSION_CHARS:
        raise ConfigError(
            f"an AgentCore session id has at least {MIN_SESSION_CHARS} characters, got {len(session)}",
            code="invalid_field",
        )
    query = urlencode({"qualifier": qualifier, SESSION_PARAMETER: session})
    return urlunsplit(("wss", runtime.host, f"/runtimes/{quote(runtime.arn, safe='')}/ws", query, ""))


def presign(url: str, region: str, *, expires_s: int = MAX_EXPIRES_S, credentials: Any = None) -> str:
    """``url`` with a SigV4 signature in its query, for ``expires_s`` seconds.

    Args:
        credentials: botocore credentials; default the standard chain's.

    Raises:
        ConfigError: ``expires_s`` outside 1..300, or botocore is not installed. UpstreamError: no
            credentials found.
    """
    if not 1 <= expires_s <= MAX_EXPIRES_S:
        raise ConfigError(
            f"a presigned AgentCore URL lives 1 to {MAX_EXPIRES_S} seconds, got {expires_s}",
            code="invalid_field",
        )
    try:
        import botocore.session
        from botocore.auth import SigV4QueryAuth
        from botocore.awsrequest import AWSRequest
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"signing needs botocore: {install_hint('sagemaker')} (or the bedrock extra)",
            code="missing_extra",
        ) from exc
    if credentials is None:
        credentials = botocore.session.get_session().get_credentials()
        if credentials is None:
            raise UpstreamError(
                "no AWS credentials to sign with (environment, profile, container or instance role)"
            )
    parts = urlsplit(url)
    request = AWSRequest(method="GET", url=urlunsplit(("https", *parts[1:])), headers={"host": parts.netloc})
    SigV4QueryAuth(credentials.get_frozen_credentials(), SERVICE, region, expires=expires_s).add_auth(request)
    signed: str = request.url
    return urlunsplit(("wss", *urlsplit(signed)[1:]))


def page_url(page: str, agent_url: str, token: str | None = None) -> str:
    """The browser page, told where the agent is (and its JWT): both in the fragment, which no server sees."""
    fragment = {"agent": agent_url, **({"token": token} if token else {})}
    return urlunsplit((*urlsplit(page)[:4], urlencode(fragment)))
