"""A streamed HTTP response that holds something (an admission slot) until it ends, however it ends."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class HeldStreamingResponse(StreamingResponse):
    """Runs ``release`` when the response ends: done, failed, its client gone, or its body never iterated
    (a generator's own ``finally`` would not run then)."""

    def __init__(
        self,
        content: AsyncIterable[str | bytes],
        release: Callable[[], None],
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
