"""The streaming protocol's parser, without I/O: a frame (text or binary) in, a typed message or an error out.

SageMaker forwards client payloads as binary frames unless the client marks them UTF-8, so both frame
kinds carry the same JSON. The messages themselves are :mod:`koe.wire.messages`; docs/protocol.md.
NIM's events nest their settings (``session.input_text_synthesis.voice_name``...); they are read into the
same options as everyone else's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koe.errors import ConfigError, ProtocolError
from koe.server.voices import aura_voice, magpie_voice
from koe.wire.fields import (
    bool_field,
    float_query_field,
    int_query_field,
    lang_field,
    preview,
    request_id_field,
    sample_rate_field,
    speed_field,
    stream_format_field,
    text_field,
    voice_field,
)
from koe.wire.json import parse_object
from koe.wire.messages import (
    Append,
    Cancel,
    ClientMessage,
    Close,
    Configure,
    Dialect,
    Flush,
    Request,
    SessionOptions,
)

_CONTROL: dict[str, Flush | Cancel | Close] = {
    "flush": Flush(Dialect.KOE),
    "cancel": Cancel(Dialect.KOE),
    "close": Close(Dialect.KOE),
    "Flush": Flush(Dialect.DEEPGRAM),
    "Clear": Cancel(Dialect.DEEPGRAM),
    "Close": Close(Dialect.DEEPGRAM),
    "input_text.commit": Flush(Dialect.NIM),
    "input_text.done": Flush(Dialect.NIM, last=True),
    "session.end": Close(Dialect.NIM),
}
_TEXT_TYPES = {"append": Dialect.KOE, "Speak": Dialect.DEEPGRAM, "input_text.append": Dialect.NIM}
_NIM_UPDATE = "synthesize_session.update"
_TYPES = ", ".join(["config", _NIM_UPDATE, *_TEXT_TYPES, *_CONTROL])
#: NIM's only audio format: the PCM16 koe sends base64-encoded in ``conversation.item.speech.data``.
NIM_AUDIO_FORMAT = "LINEAR_PCM"


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
    obj = parse_object(data, max_bytes=max_bytes)
    kind = obj.get("type")
    if kind is None and "text" in obj:
        return Request(
            text=text_field(obj, max_chars),
            options=_options(obj),
            request_id=request_id_field(obj.get("request_id")),
        )
    if kind == "config":
        return Configure(_options(obj))
    if kind == _NIM_UPDATE:
        return Configure(_nim_options(obj), Dialect.NIM)
    if isinstance(kind, str) and kind in _TEXT_TYPES:
        return Append(text_field(obj, max_chars), _TEXT_TYPES[kind])
    if isinstance(kind, str) and kind in _CONTROL:
        return _CONTROL[kind]
    raise ProtocolError(
        f'expected type to be one of {_TYPES} (or an untyped {{"text": ...}} request), got {preview(kind)}'
    )


def parse_query(params: Mapping[str, str]) -> SessionOptions:
    """Session options from the connect URL's query (SageMaker's ``ModelQueryString``).

    Unknown parameters are ignored: clients for other servers send their own. ``encoding`` is accepted as
    another name for ``format``, ``language`` for ``lang``, and Deepgram's ``model`` names the voice (an
    Aura model or a Kokoro voice, :func:`~koe.server.voices.aura_voice`) unless ``voice`` is given too.

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
    return _options(raw)


_QUERY_BOOLS = {"true": True, "false": False}


def _options(obj: Mapping[str, Any]) -> SessionOptions:
    """Validate the settings fields present in ``obj``; each error names its field."""
    return SessionOptions(
        voice=None if obj.get("voice") is None else voice_field(obj["voice"]),
        speed=None if obj.get("speed") is None else speed_field(obj["speed"]),
        sample_rate=None if obj.get("sample_rate") is None else sample_rate_field(obj["sample_rate"]),
        format=None if obj.get("format") is None else stream_format_field(obj["format"]),
        lang=None if obj.get("lang") is None else lang_field(obj["lang"]),
        words=None if obj.get("words") is None else bool_field("words", obj["words"]),
    )


def _nim_options(obj: Mapping[str, Any]) -> SessionOptions:
    """NIM's ``session``: ``input_text_synthesis`` {voice_name, language_code} and ``output_audio_params``
    {sample_rate_hz, num_channels, audio_format}; each part optional. ``voice_name`` is a Magpie voice or a
    Kokoro voice (:func:`~koe.server.voices.magpie_voice`)."""
    session = _section(obj, "session")
    voice = _section(session, "input_text_synthesis")
    audio = _section(session, "output_audio_params")
    audio_format = audio.get("audio_format")
    if audio_format not in (None, NIM_AUDIO_FORMAT):
        raise ConfigError(
            f"output_audio_params.audio_format: koe sends {NIM_AUDIO_FORMAT} only, "
            f"got {preview(audio_format)}",
            code="invalid_field",
        )
    if audio.get("num_channels") not in (None, 1):
        raise ConfigError(
            f"output_audio_params.num_channels: koe sends mono (1), got {preview(audio['num_channels'])}",
            code="invalid_field",
        )
    name = voice.get("voice_name")
    return _options(
        {
            "voice": magpie_voice(name) if isinstance(name, str) else name,
            "lang": voice.get("language_code"),
            "sample_rate": audio.get("sample_rate_hz"),
        }
    )


def _section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"expected {name} to be an object, got {type(value).__name__}")
    return value
