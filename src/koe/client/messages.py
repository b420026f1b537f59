"""koe's streaming protocol seen from the client, without I/O: requests encoded, replies decoded.

Requests are the server's own ``ClientMessage`` dataclasses, encoded so that the server's ``parse_message``
gives them back; text frames from the server are decoded into the dataclasses its ``encode`` wrote. Binary
frames are audio and are passed through by the caller. Both ends share one definition of the protocol.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from koe.errors import ProtocolError
from koe.pipeline.words import SpokenWord
from koe.wire.messages import (
    Append,
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    ConfigAck,
    Configure,
    Error,
    Flush,
    Flushed,
    Request,
    SegmentEnd,
    SegmentStart,
    ServerMessage,
    SynthesisComplete,
    SynthesisStart,
    Words,
)

#: The koe dialect's replies a client of ``append``/``flush``/``cancel`` can receive.
_TYPES: dict[str, type[Any]] = {
    m.TYPE: m for m in (ConfigAck, SegmentStart, Words, SegmentEnd, Flushed, Cancelled, Error,
                        SynthesisStart, SynthesisComplete)
}  # fmt: skip


def decode(text: str) -> ServerMessage:
    """One text frame from a koe server as its message.

    Raises:
        ProtocolError: not JSON, an unknown ``type``, or fields that do not match it.
    """
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"expected a JSON message from the TTS server, got {text[:80]!r}") from exc
    if not isinstance(body, dict) or body.get("type") not in _TYPES:
        raise ProtocolError(f"expected a message type among {', '.join(_TYPES)}, got {str(body)[:80]}")
    kind = _TYPES[body.pop("type")]
    for alias in getattr(kind, "ALIASES", {}):
        body.pop(alias, None)  # the same figure under another name (``SynthesisComplete``)
    if "source_span" in body and isinstance(body["source_span"], list):
        body["source_span"] = tuple(body["source_span"])
    try:
        if kind is Words:
            body["words"] = tuple(_word(**w) for w in body["words"])
        message: ServerMessage = kind(**body)
    except (TypeError, KeyError, IndexError) as exc:
        raise ProtocolError(f"unexpected fields in a {kind.TYPE!r} message: {exc}") from exc
    return message


def _word(word: str, start_s: float, end_s: float, source_span: list[int]) -> SpokenWord:
    return SpokenWord(word, (source_span[0], source_span[1]), start_s, end_s)


_CONTROL_TYPES = {Flush: "flush", Cancel: "cancel", Close: "close"}


def encode_request(message: ClientMessage) -> str:
    """One client message as the JSON text frame koe's server parses back into ``message``.

    Always the koe dialect: an ``Append``'s or a control message's ``dialect`` field is not sent.
    """
    body: dict[str, Any]
    if isinstance(message, Append):
        body = {"type": "append", "text": message.text}
    elif isinstance(message, Configure):
        body = {"type": "config", **_set_options(message)}
    elif isinstance(message, Request):
        body = {"text": message.text, **_set_options(message)}
        if message.request_id is not None:
            body["request_id"] = message.request_id
    else:
        body = {"type": _CONTROL_TYPES[type(message)]}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _set_options(message: Configure | Request) -> dict[str, Any]:
    options = message.options
    return {f.name: getattr(options, f.name) for f in fields(options) if getattr(options, f.name) is not None}
