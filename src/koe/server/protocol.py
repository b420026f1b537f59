"""The streaming protocol's parser, without I/O: a frame (text or binary) in, a typed message or an error out.

SageMaker forwards client payloads as binary frames unless the client marks them UTF-8, so both frame
kinds carry the same JSON. The messages themselves are :mod:`koe.wire.messages`; which dialect sends which
``type`` is :mod:`koe.server.dialects`' (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from koe.errors import ProtocolError
from koe.server.dialects import SPECS
from koe.server.dialects.base import MessageParser, options
from koe.server.dialects.deepgram import aura_voice
from koe.wire.fields import float_query_field, int_query_field, preview
from koe.wire.json import check_size, parse_object
from koe.wire.messages import ClientMessage, SessionOptions, decode_frame

#: Every dialect's message types, each with its parser.
_PARSERS: dict[str, MessageParser] = {
    kind: parser for spec in SPECS.values() for kind, parser in spec.messages.items()
}
_UNTYPED: list[MessageParser] = [spec.untyped for spec in SPECS.values() if spec.untyped is not None]
_TYPES = ", ".join(_PARSERS)


def parse_message(data: str | bytes, *, max_bytes: int, max_chars: int) -> ClientMessage:
    """Parse one WebSocket frame.

    Args:
        data: the frame's payload; binary frames must hold UTF-8 JSON.
        max_bytes: the largest frame accepted.
        max_chars: the most text one message may carry.

    Raises:
        LimitError: the frame (``message_too_large``) or its text (``text_too_long``) is over its limit.
        ProtocolError: not UTF-8 JSON (``invalid_json``) or not a message we know (``invalid_message``).
        ConfigError: a setting has a bad value (``invalid_field``).
    """
    check_size(data, max_bytes=max_bytes)
    frame = decode_frame(data)  # koe's plain requests by their schema: every append takes this way
    obj = parse_object(data, max_bytes=None) if frame is None else msgspec.to_builtins(frame)
    kind = obj.get("type")
    if kind is None and "text" in obj and _UNTYPED:
        return _UNTYPED[0](obj, max_chars)
    if isinstance(kind, str) and kind in _PARSERS:
        return _PARSERS[kind](obj, max_chars)
    raise ProtocolError(
        f'expected type to be one of {_TYPES} (or an untyped {{"text": ...}} request), got {preview(kind)}'
    )


def parse_query(params: Mapping[str, str]) -> SessionOptions:
    """Session options from the connect URL's query (SageMaker's ``ModelQueryString``).

    Unknown parameters are ignored: clients for other servers send their own. ``encoding`` is accepted as
    another name for ``format``, ``language`` for ``lang``, and Deepgram's ``model`` names the voice (an
    Aura model or a Kokoro voice, :func:`~koe.server.dialects.deepgram.aura_voice`) unless ``voice`` is
    given too.

    Raises:
        ConfigError: a known parameter has a bad value (``invalid_field``).
    """
    raw: dict[str, Any] = {}
    for name in ("voice", "lang", "format"):
        if name in params:
            raw[name] = params[name]
    if "voice" not in raw and params.get("model"):
        raw["voice"] = aura_voice(params["model"])
    if "format" not in raw and "encoding" in params:
        raw["format"] = params["encoding"]
    if "lang" not in raw and "language" in params:
        raw["lang"] = params["language"]
    if "speed" in params:
        raw["speed"] = float_query_field("speed", params["speed"])
    if "sample_rate" in params:
        raw["sample_rate"] = int_query_field("sample_rate", params["sample_rate"])
    if "words" in params:
        raw["words"] = _QUERY_BOOLS.get(params["words"].lower(), params["words"])
    return options(raw)


_QUERY_BOOLS = {"true": True, "false": False}
