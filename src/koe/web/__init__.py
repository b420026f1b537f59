"""The browser page: static files (ES modules, an AudioWorklet) shipped inside the package, and the routes
that serve them at ``/`` beside whichever app hosts the voice agent (``koe serve`` and ``koe agent``).

One route per file rather than a mount at ``/``: a mount would match every path, so a wrong method on
another route (``GET /invocations``) would be the page's 404 instead of that route's 405."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Route
from starlette.staticfiles import StaticFiles

#: The page's files ship as package data, so a wheel install serves them too.
WEB_DIR = Path(__file__).resolve().parent / "static"


def page() -> list[BaseRoute]:
    """The page's routes (``/`` is ``index.html``; ES modules, the AudioWorklet); GET and HEAD only."""
    files = StaticFiles(directory=WEB_DIR, html=True)
    return [Route(path, files, methods=["GET", "HEAD"]) for path in sorted(page_paths())]


def page_paths() -> frozenset[str]:
    """The page's URL paths: ``/`` and each file (they hold no data, so they need no key)."""
    files = (p for p in WEB_DIR.rglob("*") if p.is_file())
    return frozenset({"/", *("/" + p.relative_to(WEB_DIR).as_posix() for p in files)})
