"""koe's uvicorn configuration, the same for ``koe serve``, ``koe agent``, the benchmarks and the tests.

The protocols are pinned to h11 and wsproto, with koe's deadlines (:mod:`koe.server.connections`). wsproto's
``send`` waits while the transport's buffer is full, so a client that stops reading blocks our writer and,
through the session's water marks, pauses its own synthesis. (uvicorn's ``websockets-sansio``
implementation buffers without bound instead.)
"""

from __future__ import annotations

from typing import Any

import uvicorn
from starlette.applications import Starlette

from koe.server.connections import protocols
from koe.settings import Settings

#: uvicorn closes with 1009 by itself above this multiple of our own message limit; between the two,
#: koe answers with an ``error`` message first, which tells the client what the limit is.
_TRANSPORT_SIZE_FACTOR = 2


def uvicorn_config(app: Starlette, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration for ``app`` (``overrides`` for tests: ``port=0``, ``log_config=None``)."""
    http, ws = protocols(settings)
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "http": http,
        "ws": ws,
        "ws_max_size": settings.max_message_bytes * _TRANSPORT_SIZE_FACTOR,
        # no permessage-deflate: wsproto inflates a whole compressed message before any size limit applies,
        # so ~255 KB on the wire could cost 256 MB of memory and a stalled loop, even before a key is checked
        "ws_per_message_deflate": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
        "log_config": None,  # the CLI configures logging; uvicorn must not replace it
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)
