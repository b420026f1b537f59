"""The client dialects a WebSocket session speaks, one module each; :data:`SPECS` is the one list of them.

A dialect's module holds all koe knows of it — the message types it sends, the replies around its turns'
audio, its voice names, its session rules — as one :class:`~koe.server.dialects.base.DialectSpec` named
``SPEC``. Adding a dialect is a module, its member of :class:`~koe.wire.messages.Dialect`, and its line here.
"""

from __future__ import annotations

from koe.server.dialects import aws, deepgram, native, nim
from koe.server.dialects.base import DialectSpec
from koe.wire.messages import Dialect

#: Every dialect by its name; their message types are listed in this order in errors.
SPECS: dict[Dialect, DialectSpec] = {
    spec.dialect: spec for spec in (native.SPEC, aws.SPEC, deepgram.SPEC, nim.SPEC)
}
