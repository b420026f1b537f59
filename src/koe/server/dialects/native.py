"""koe's own dialect: ``config``/``append``/``flush``/``cancel``/``close``, answered with ``segment``,
``words`` and ``segment_end`` around each segment's audio and ``flushed`` at the end (docs/protocol.md):
:class:`~koe.server.dialects.base.Replies` as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koe.pipeline.voice import Voice
from koe.server.dialects.base import DialectSpec, Replies, appended, constant, options
from koe.wire.fields import STREAM_FORMATS
from koe.wire.messages import (
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    ConfigAck,
    Configure,
    Dialect,
    Flush,
    ServerMessage,
    TurnOptions,
)


def config_ack(session: str, voice: Voice, options: TurnOptions) -> ServerMessage:
    """The settings in force as koe's ``config`` reply, which AWS and Deepgram clients get too."""
    return ConfigAck(
        session, voice.spec, voice.speed, options.sample_rate, STREAM_FORMATS[options.format], voice.lang
    )


def _configure(obj: Mapping[str, Any], max_chars: int) -> ClientMessage:
    return Configure(options(obj))


SPEC = DialectSpec(
    Dialect.KOE,
    messages={
        "config": _configure,
        "append": appended(Dialect.KOE),
        "flush": constant(Flush(Dialect.KOE)),
        "cancel": constant(Cancel(Dialect.KOE)),
        "close": constant(Close(Dialect.KOE)),
    },
    replies=Replies,
    config_reply=config_ack,
    cancelled=Cancelled,
)
