"""The browser page: static files (ES modules, an AudioWorklet) shipped inside the package, and the mount
that serves them at ``/`` beside whichever app hosts the voice agent (``koe serve`` and ``koe agent``)."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocketClose

#: The page's files ship as package data, so a wheel install serves them too.
WEB_DIR = Path(__file__).resolve().parent / "static"


class _Page:
    """The page's static files for HTTP; a WebSocket to a path nobody serves is closed, as Starlette does."""

    def __init__(self) -> None:
        self._files = StaticFiles(directory=WEB_DIR, html=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._files(scope, receive, send)
        else:
            await WebSocketClose()(scope, receive, send)


def page() -> Mount:
    """The browser page at ``/`` (``index.html``, ES modules, the AudioWorklet); mount it last."""
    return Mount("/", app=_Page(), name="page")


def page_paths() -> frozenset[str]:
    """The page's URL paths: ``/`` and each file (they hold no data, so they need no key)."""
    files = (p for p in WEB_DIR.rglob("*") if p.is_file())
    return frozenset({"/", *("/" + p.relative_to(WEB_DIR).as_posix() for p in files)})
