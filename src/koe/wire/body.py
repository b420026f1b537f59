"""Reading an HTTP request's body within a limit, for every HTTP route of every transport."""

from __future__ import annotations

from starlette.requests import Request

from koe.errors import LimitError


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused as soon as it passes ``limit`` bytes (never buffered beyond it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise LimitError(f"body of {declared} bytes is over the limit of {limit}", code="body_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise LimitError(f"body is over the limit of {limit} bytes", code="body_too_large")
    return bytes(body)
