"""The one exception hierarchy of koe.

Tree::

    KoeError
    ├── ConfigError          bad settings or request fields (a client can fix it)
    │   └── VoiceError       unknown voice or malformed blend
    ├── AssetError           a model file or voice is missing or its hash is wrong
    ├── SynthesisError       G2P or the engine failed on valid input
    ├── ProtocolError        a streaming message could not be understood
    ├── LimitError           an input or session crossed a configured limit
    ├── OverloadedError      admission control refused new work
    └── UpstreamError        a service koe calls (an LLM, a remote TTS endpoint) failed or is unreachable
        └── ConnectionLostError  an open connection to it closed: a new one may succeed

Library errors are mapped to these once, at the boundary, with ``raise ... from exc``.
"""

from __future__ import annotations


class KoeError(Exception):
    """Base of every error koe raises on purpose; ``code`` is the stable machine-readable name, ``param``
    the request field it is about, where there is one (OpenAI's error shape reports it)."""

    code = "internal_error"
    param: str | None = None

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if param is not None:
            self.param = param


class ConfigError(KoeError):
    code = "invalid_request"


class VoiceError(ConfigError):
    code = "unknown_voice"


class AssetError(KoeError):
    code = "asset_error"


class SynthesisError(KoeError):
    code = "synthesis_failed"


class ProtocolError(KoeError):
    code = "invalid_message"


class LimitError(KoeError):
    code = "limit_exceeded"


class OverloadedError(KoeError):
    code = "queue_saturated"

    def __init__(self, message: str, *, retry_after_s: float = 1.0, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


class UpstreamError(KoeError):
    code = "upstream_error"


class ConnectionLostError(UpstreamError):
    """A connection that was open closed (the peer restarted, a network blip): reconnecting may help."""
