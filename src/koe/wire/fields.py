"""Validators for the fields clients send (WebSocket messages, query strings, HTTP bodies).

Each returns the clean value or raises ``ConfigError`` with code ``invalid_field`` and a message that
names the field, says what was expected and shows (a bounded preview of) what was got.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, cast

from koe.audio.formats import AudioFormat, check_sample_rate, parse_format
from koe.errors import ConfigError, LimitError, ProtocolError
from koe.wire.params import validate_lang, validate_speed

#: A voice spec longer than this is no voice or blend we could hold (names, weights and '+').
MAX_VOICE_CHARS = 200
#: Formats a stream can carry frame by frame (no container); the value is the name used on the wire.
STREAM_FORMATS: dict[AudioFormat, str] = {
    AudioFormat.PCM: "pcm_s16le",
    AudioFormat.MULAW: "mulaw",
    AudioFormat.ALAW: "alaw",
}
#: Longer than any language tag (BCP 47's longest registered ones are well within it).
MAX_LANG_CHARS = 35
#: The longest ``request_id`` echoed back (ids are uuids or counters; a page of text is no id).
MAX_REQUEST_ID_CHARS = 256
#: A number in a query string longer than this is out of every range koe takes (and is never converted).
MAX_QUERY_NUMBER_CHARS = 24
_FORMAT_ALIASES = {"linear16": "pcm"}  # Deepgram's name for raw 16-bit PCM
_PREVIEW_CHARS = 60
# ``[0-9]``, not ``\d``: ``int()`` and ``float()`` also take other scripts' digits, ``_`` and spaces
_QUERY_INTEGER = re.compile(r"[+-]?[0-9]+")
_QUERY_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# RFC 9110's field value, ASCII only: visible characters, spaces only inside; never CR, LF, NUL or TAB
_HEADER_VALUE = re.compile(r"[!-~](?:[ -~]*[!-~])?")


def preview(value: object) -> str:
    """A bounded rendering of a bad value for an error message (hostile input can be huge)."""
    shown = repr(value)
    return shown if len(shown) <= _PREVIEW_CHARS else shown[: _PREVIEW_CHARS - 3] + "..."


def _invalid(message: str) -> ConfigError:
    return ConfigError(message, code="invalid_field")


def bool_field(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be true or false, got {preview(value)}")
    return value


def voice_field(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_VOICE_CHARS:
        raise _invalid(
            f"voice must be a voice name or blend of at most {MAX_VOICE_CHARS} characters, "
            f"got {preview(value)}"
        )
    return value.strip()


def number_field(name: str, value: object, low: float, high: float) -> float:
    """A JSON number in ``[low, high]``. The range is checked before any conversion, so a 400-digit
    integer is refused like any number out of range rather than overflowing ``float()``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _invalid(f"{name} must be a number from {low:g} to {high:g}, got {preview(value)}")
    return float(value)


def speed_field(value: object) -> float:
    try:
        return validate_speed(value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


def int_query_field(name: str, raw: str) -> int:
    """A query parameter's integer: ASCII digits, at most :data:`MAX_QUERY_NUMBER_CHARS` of them (the range
    is the caller's). ``int()`` alone would take ``'١٦٠٠٠'`` and ``'16_000'``, and fail with ``ValueError``
    on ``'²'`` (a digit to ``str.isdigit``) or 5,000 nines."""
    return int(_query_number(name, raw, _QUERY_INTEGER, "an integer"))


def float_query_field(name: str, raw: str) -> float:
    """A query parameter's decimal number (``1``, ``1.25``, ``.5``, ``2e-1``; not ``nan``), bounded as
    :func:`int_query_field` (the range is the caller's)."""
    return float(_query_number(name, raw, _QUERY_DECIMAL, "a decimal number"))


def _query_number(name: str, raw: str, pattern: re.Pattern[str], what: str) -> str:
    number = raw.strip()
    if len(number) > MAX_QUERY_NUMBER_CHARS or not pattern.fullmatch(number):
        raise _invalid(f"{name} must be {what} in ASCII digits, got {preview(raw)}")
    return number


def header_safe(value: str, max_chars: int) -> bool:
    """Whether ``value`` can go back in a response header as it came: 1 to ``max_chars`` printable ASCII
    characters, no space at either end. Anything else breaks the header (a UnicodeEncodeError, or a CR LF
    that h11 refuses) after the request was admitted, or smuggles a header of its own."""
    return len(value) <= max_chars and _HEADER_VALUE.fullmatch(value) is not None


def header_value_field(name: str, value: str, max_chars: int) -> str:
    """``value`` of the field ``name``, which a response header echoes (:func:`header_safe`)."""
    if not header_safe(value, max_chars):
        raise _invalid(
            f"{name} must be 1 to {max_chars} printable ASCII characters (it is echoed in a header), "
            f"got {preview(value)}"
        )
    return value


def request_id_field(value: object) -> str | int | None:
    """A client's ``request_id``, echoed in every event of its request: a string of at most
    :data:`MAX_REQUEST_ID_CHARS` characters or a 64-bit integer.

    Raises:
        ProtocolError: anything else (``invalid_message``), on every transport alike.
    """
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= MAX_REQUEST_ID_CHARS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    raise ProtocolError(
        f"expected request_id to be a string of at most {MAX_REQUEST_ID_CHARS} characters or a 64-bit "
        f"integer, got {preview(value)}"
    )


def sample_rate_field(value: object, fmt: AudioFormat = AudioFormat.PCM) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"sample_rate must be an integer, got {preview(value)}")
    try:
        return check_sample_rate(fmt, value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


def format_field(value: object, allowed: Collection[AudioFormat], names: Collection[str]) -> AudioFormat:
    """A format among ``allowed``; ``names`` are the spellings listed in the error message."""
    if not isinstance(value, str):
        raise _invalid(f"format must be a string, got {preview(value)}")
    try:
        fmt = parse_format(_FORMAT_ALIASES.get(value.strip().lower(), value))
    except ConfigError:
        fmt = None
    if fmt not in allowed:
        raise _invalid(f"format must be one of {', '.join(names)}, got {preview(value)}")
    assert fmt is not None  # None is never in allowed
    return fmt


def stream_format_field(value: object) -> AudioFormat:
    return format_field(value, STREAM_FORMATS, STREAM_FORMATS.values())


def lexicon_field(value: object) -> dict[str, dict[str, str]]:
    """A caller's lexicon as it travels: an object of language → object of word → phonemes or ``=respelling``
    (its words and values are checked against the model where it is used:
    :func:`koe.pipeline.lexicon.caller_lexicon`)."""
    if not isinstance(value, dict) or not all(
        isinstance(words, dict) and all(isinstance(ph, str) for ph in words.values())
        for words in value.values()
    ):
        raise _invalid(
            "lexicon must be an object of language → object of word → phonemes or =respelling, such as "
            f'{{"en-us": {{"koe": "kˈOA", "Nguyen": "=win"}}}}; got {preview(value)}'
        )
    return cast(dict[str, dict[str, str]], value)


def lang_field(value: object) -> str:
    if not isinstance(value, str):
        raise _invalid(f"lang must be a string, a language tag such as en-us; got {preview(value)}")
    if len(value) > MAX_LANG_CHARS:
        raise _invalid(f"lang must be a language tag such as en-us, got {preview(value)}")
    try:
        return validate_lang(value)
    except ConfigError as exc:
        raise _invalid(exc.message) from exc


def text_field(obj: Mapping[str, Any], max_chars: int, name: str = "text") -> str:
    """The text field ``name`` of a message or request body, within ``max_chars``."""
    text = obj.get(name)
    if not isinstance(text, str):
        raise ProtocolError(f"expected {name} to be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise LimitError(
            f"text of {len(text)} characters is over the limit of {max_chars} per message",
            code="text_too_long",
        )
    return text
