"""Where speech is synthesized: a TTS URL parsed into a koe server or a SageMaker endpoint.

* ``ws(s)://host:port[/path]`` or ``http(s)://host:port`` — a koe server, over a WebSocket (``/v1/stream``
  unless a path is given). The API key, when there is one, goes as ``Authorization: Bearer``.
* ``sagemaker://ENDPOINT_NAME[?region=REGION&variant=VARIANT]`` — a SageMaker AI endpoint running koe's
  image, through ``InvokeEndpointWithBidirectionalStream``, signed with SigV4 from the standard AWS
  credential chain. The region defaults to ``AWS_REGION``, then ``AWS_DEFAULT_REGION``.

Both targets open the same :class:`~koe.client.session.StreamClient`, so everything above the transport
(turns, barge-in, word timings) is one code path. Parsing does no I/O: a malformed URL fails at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from koe.client import sagemaker, websocket
from koe.client.session import StreamClient
from koe.errors import ConfigError

SAGEMAKER_SCHEME = "sagemaker"
WEBSOCKET_SCHEMES = ("ws", "wss", "http", "https")
#: The variable a koe server reads its key from; the agent sends the same one to its TTS server.
API_KEY_VARIABLE = "KOE_API_KEY"
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
#: SageMaker's rule for endpoint and variant names.
_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_SAGEMAKER_QUERY = ("region", "variant")
_VOICES_PATH = "/v1/audio/voices"


@dataclass(frozen=True, slots=True)
class WebSocketTarget:
    """A koe server reached directly; ``api_key`` is never shown (``describe``, ``repr``)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        return self.base_url + (" (with its API key)" if self.api_key else "")

    async def connect(self, **options: Any) -> StreamClient:
        """A session; ``options`` (format, sample_rate...) go in the stream URL's query.

        Raises:
            UpstreamError: the server cannot be reached or refused the connection.
        """
        return await websocket.connect(websocket.stream_url(self.base_url, **options), api_key=self.api_key)

    @property
    def voices_url(self) -> str:
        """Where the server lists its voices (``GET``)."""
        parts = urlsplit(websocket.stream_url(self.base_url))
        scheme = "https" if parts.scheme == "wss" else "http"
        return urlunsplit((scheme, parts.netloc, _VOICES_PATH, "", ""))


@dataclass(frozen=True, slots=True)
class SageMakerTarget:
    """A SageMaker AI endpoint serving koe's container (``deploy/cdk``)."""

    endpoint_name: str
    region: str
    variant: str | None = None

    def describe(self) -> str:
        variant = f", variant {self.variant}" if self.variant else ""
        return f"SageMaker endpoint {self.endpoint_name} in {self.region}{variant}"

    async def connect(self, **options: Any) -> StreamClient:
        """A session; ``options`` travel as the model query string.

        Raises:
            ConfigError: the SDK is missing. UpstreamError: the stream could not be opened.
        """
        return await sagemaker.connect(
            self.endpoint_name, self.region, target_variant=self.variant, **options
        )


TtsTarget = WebSocketTarget | SageMakerTarget


def parse_target(
    url: str, *, api_key: str | None = None, environ: Mapping[str, str] | None = None
) -> TtsTarget:
    """The target ``url`` names.

    Args:
        url: ``ws(s)://…``, ``http(s)://…`` or ``sagemaker://ENDPOINT[?region=…&variant=…]``.
        api_key: for a koe server; default ``KOE_API_KEY`` from ``environ``. SageMaker signs its requests
            instead, so an explicit key with a ``sagemaker://`` URL is an error (the variable is ignored).
        environ: where ``KOE_API_KEY`` and the AWS region are read (default ``os.environ``).

    Raises:
        ConfigError: an unknown scheme, a malformed name, region or query, or a key that is not
            printable ASCII.
    """
    env = os.environ if environ is None else environ
    parts = urlsplit(url.strip())
    if parts.scheme == SAGEMAKER_SCHEME:
        if api_key is not None:
            raise ConfigError(
                "an API key is for ws:// and http:// TTS servers; SageMaker signs requests with SigV4",
                code="invalid_field",
            )
        return _sagemaker(url, parts.netloc, parts.path, parts.query, env)
    if parts.scheme in WEBSOCKET_SCHEMES:
        websocket.stream_url(url)  # validates the host part
        key = api_key if api_key is not None else env.get(API_KEY_VARIABLE) or None
        if key is not None and not (key.isascii() and key.isprintable() and " " not in key):
            raise ConfigError(
                "the TTS API key must be printable ASCII without spaces (it travels in a header)",
                code="invalid_field",
            )
        return WebSocketTarget(url.strip(), key)
    raise ConfigError(
        f"expected a TTS URL like ws://host:8080 or sagemaker://ENDPOINT?region=us-east-1, got {url!r}",
        code="invalid_field",
    )


def _sagemaker(url: str, name: str, path: str, query: str, env: Mapping[str, str]) -> SageMakerTarget:
    if not _SAGEMAKER_NAME.match(name) or path not in ("", "/"):
        raise ConfigError(
            f"expected sagemaker://ENDPOINT_NAME (letters, digits and hyphens, at most 63), got {url!r}",
            code="invalid_field",
        )
    try:
        fields = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"cannot read the query of {url!r}: {exc}", code="invalid_field") from exc
    unknown = sorted(set(fields) - set(_SAGEMAKER_QUERY))
    repeated = sorted(k for k, v in fields.items() if len(v) > 1)
    if unknown or repeated:
        raise ConfigError(
            f"a sagemaker:// URL takes {' and '.join(_SAGEMAKER_QUERY)} once each, got {query!r}",
            code="invalid_field",
        )
    region = (
        fields["region"][0]
        if "region" in fields
        else next((env[v] for v in REGION_VARIABLES if env.get(v)), None)
    )
    if region is None:
        raise ConfigError(
            f"{url!r} names no region: add ?region=us-east-1 or set AWS_REGION", code="invalid_field"
        )
    if not _REGION.match(region):
        raise ConfigError(f"expected an AWS region like us-east-1, got {region!r}", code="invalid_field")
    variant = fields.get("variant", [None])[0]
    if variant is not None and not _SAGEMAKER_NAME.match(variant):
        raise ConfigError(f"expected a production variant name, got {variant!r}", code="invalid_field")
    return SageMakerTarget(name, region, variant)
