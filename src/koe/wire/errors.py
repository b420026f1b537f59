"""The one place that says how each error reaches a client: HTTP status, WebSocket close code, JSON body.

Codes not listed fall back to their class's row, so a new ``KoeError`` subclass still maps somewhere sane.
A WebSocket close code of ``None`` means the error is recoverable: the session stays open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koe.errors import (
    AssetError,
    ConfigError,
    KoeError,
    LimitError,
    OverloadedError,
    ProtocolError,
    SynthesisError,
)

# RFC 6455 §7.4.1 close codes used by koe
WS_NORMAL = 1000
WS_GOING_AWAY = 1001
WS_POLICY_VIOLATION = 1008
WS_MESSAGE_TOO_BIG = 1009
WS_INTERNAL_ERROR = 1011
WS_TRY_AGAIN_LATER = 1013


@dataclass(frozen=True, slots=True)
class ErrorRoute:
    http_status: int
    ws_close: int | None


_BY_CODE: dict[str, ErrorRoute] = {
    "invalid_json": ErrorRoute(400, None),
    "invalid_message": ErrorRoute(400, None),
    "invalid_request": ErrorRoute(400, None),
    "invalid_field": ErrorRoute(400, None),
    "unknown_voice": ErrorRoute(400, None),
    "invalid_markup": ErrorRoute(400, None),  # pronunciation markup that cannot be honoured
    "unsupported_media_type": ErrorRoute(415, None),
    "unauthorized": ErrorRoute(401, WS_POLICY_VIOLATION),  # KOE_API_KEY set, key missing or wrong
    "request_stale": ErrorRoute(408, None),
    "body_timeout": ErrorRoute(408, None),  # the body did not arrive in time (a slow or stuck client)
    "client_disconnected": ErrorRoute(400, None),  # the client left mid-body: nobody reads the answer
    "forbidden_origin": ErrorRoute(403, WS_POLICY_VIOLATION),  # a page of another site (koe.server.origin)
    "forbidden_host": ErrorRoute(403, WS_POLICY_VIOLATION),  # a Host the server is not (DNS rebinding)
    "text_too_long": ErrorRoute(413, WS_MESSAGE_TOO_BIG),
    "body_too_large": ErrorRoute(413, WS_MESSAGE_TOO_BIG),
    "message_too_large": ErrorRoute(413, WS_MESSAGE_TOO_BIG),
    "turn_too_long": ErrorRoute(413, WS_POLICY_VIOLATION),
    "session_too_long": ErrorRoute(413, WS_POLICY_VIOLATION),
    "session_expired": ErrorRoute(408, WS_POLICY_VIOLATION),
    "too_many_turns": ErrorRoute(429, None),  # a session's turns waiting to be spoken: this one refused
    "replies_unread": ErrorRoute(429, WS_POLICY_VIOLATION),  # a client that sends but never reads
    "idle_timeout": ErrorRoute(408, WS_POLICY_VIOLATION),
    "queue_saturated": ErrorRoute(503, WS_TRY_AGAIN_LATER),
    "over_capacity": ErrorRoute(503, WS_TRY_AGAIN_LATER),  # a newcomer would make every listener gap
    "too_many_sessions": ErrorRoute(503, WS_TRY_AGAIN_LATER),
    "not_ready": ErrorRoute(503, WS_TRY_AGAIN_LATER),
    "shutting_down": ErrorRoute(503, WS_GOING_AWAY),
    "synthesis_failed": ErrorRoute(500, None),
    # a language whose G2P is not installed here: the server cannot, the session may go on in another
    "language_unavailable": ErrorRoute(501, None),
}

_BY_CLASS: tuple[tuple[type[KoeError], ErrorRoute], ...] = (
    (ConfigError, ErrorRoute(400, None)),
    (ProtocolError, ErrorRoute(400, None)),
    (LimitError, ErrorRoute(413, WS_POLICY_VIOLATION)),
    (OverloadedError, ErrorRoute(503, WS_TRY_AGAIN_LATER)),
    (SynthesisError, ErrorRoute(500, None)),
    (AssetError, ErrorRoute(500, WS_INTERNAL_ERROR)),
)
_INTERNAL = ErrorRoute(500, WS_INTERNAL_ERROR)


def route_of(error: KoeError) -> ErrorRoute:
    """How ``error`` is reported: by its code if listed, else by its class, else as internal."""
    if error.code in _BY_CODE:
        return _BY_CODE[error.code]
    for cls, route in _BY_CLASS:
        if isinstance(error, cls):
            return route
    return _INTERNAL


def error_body(error: KoeError) -> dict[str, Any]:
    """The HTTP JSON body: ``{"error": code, "message": ...}`` plus ``retry_after_s`` for overload."""
    body: dict[str, Any] = {"error": error.code, "message": error.message}
    if isinstance(error, OverloadedError):
        body["retry_after_s"] = round(error.retry_after_s, 1)
    return body


def openai_error_body(error: KoeError) -> dict[str, Any]:
    """The same error in OpenAI's shape, for ``/v1/`` routes (its SDK reads ``error.message``/``code``)."""
    kind = "invalid_request_error" if route_of(error).http_status < 500 else "server_error"
    return {"error": {"message": error.message, "type": kind, "code": error.code, "param": error.param}}


def deepgram_error_body(error: KoeError, request_id: str) -> dict[str, Any]:
    """The same error in Deepgram's shape, for its REST route (its SDKs read ``err_msg``)."""
    return {"err_code": error.code, "err_msg": error.message, "request_id": request_id}


#: Errors that leave a request body unread: the connection cannot carry another request, so it closes.
_BODY_LEFT_UNREAD = frozenset({"body_too_large", "body_timeout", "client_disconnected"})


def response_headers(error: KoeError) -> dict[str, str]:
    """Headers of an HTTP error response: ``Retry-After`` for overload, ``Connection: close`` when the
    request's body was left unread."""
    headers = retry_after_header(error)
    if error.code in _BODY_LEFT_UNREAD:
        headers["Connection"] = "close"
    return headers


def retry_after_header(error: KoeError) -> dict[str, str]:
    """``Retry-After`` (whole seconds, rounded up) for overload responses; empty otherwise."""
    if isinstance(error, OverloadedError):
        return {"Retry-After": str(max(1, -int(-error.retry_after_s // 1)))}
    return {}
