"""The one parser of a JSON object from a client: bounded in size and depth, strict about numbers and text.

Every transport reads its messages and bodies through :func:`parse_object`, so each refuses the same
inputs with the same codes: over the size limit (``message_too_large``), not UTF-8 JSON, ``NaN`` or
``Infinity``, a string holding a lone UTF-16 surrogate (``"\\ud800"``: no character, and nothing koe could
send back or log as UTF-8), nested deeper than anything koe accepts (``invalid_json``, found by a linear
scan before the recursive parser could overflow), or valid JSON that is not an object (``invalid_message``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from koe.errors import LimitError, ProtocolError

#: No message or body koe accepts nests deeper than this (a config in an object in a list would be 3).
MAX_DEPTH = 16
#: What changes nesting depth outside strings, and the strings themselves (escapes included). The string
#: alternative is possessive and also takes an unclosed string to the end of the text, so the scan never
#: backtracks and is linear whatever the input (``"\"\"\"…`` unclosed would otherwise be quadratic).
_STRUCTURE = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.S)
#: A UTF-16 surrogate left alone after JSON's escapes are decoded (a valid pair decodes to one character).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_object(data: str | bytes, *, max_bytes: int | None, what: str = "message") -> dict[str, Any]:
    """Parse one JSON object of at most ``max_bytes`` bytes (``None``: the caller already bounded it, as an
    HTTP body read within its limit); ``what`` names it in error messages.

    Raises:
        LimitError: over ``max_bytes`` (``message_too_large``).
        ProtocolError: unreadable, non-finite numbers, a lone surrogate, too deep (``invalid_json``), or
            not an object (``invalid_message``).
    """
    check_size(data, max_bytes=max_bytes, what=what)
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"expected a UTF-8 JSON object as the {what}: {exc}", code="invalid_json"
        ) from exc
    depth = _max_depth(text)
    if depth > MAX_DEPTH:
        raise ProtocolError(
            f"expected a JSON object nested at most {MAX_DEPTH} levels deep, got {depth}+",
            code="invalid_json",
        )
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise ProtocolError(
            f"expected a UTF-8 JSON object as the {what}: {exc}", code="invalid_json"
        ) from exc
    if _has_lone_surrogate(obj):
        raise ProtocolError(
            f"expected the {what}'s strings to be Unicode text, got a lone UTF-16 surrogate escape "
            "(such as \\ud800 without its pair)",
            code="invalid_json",
        )
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected the {what} to be a JSON object, got {type(obj).__name__}")
    return obj


def check_size(data: str | bytes, *, max_bytes: int | None, what: str = "message") -> None:
    """Raise ``LimitError`` (``message_too_large``) when ``data`` is over ``max_bytes`` bytes as UTF-8."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        raise LimitError(f"{what} of {size} bytes is over the limit of {max_bytes}", code="message_too_large")


def _max_depth(text: str) -> int:
    """The deepest nesting of ``text``, stopping as soon as it passes :data:`MAX_DEPTH` (linear time)."""
    depth = deepest = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    break
        elif token == "]" or token == "}":
            depth -= 1
    return deepest


def _has_lone_surrogate(value: object) -> bool:
    """Whether any string of a parsed value (keys included) holds a lone surrogate; at most
    :data:`MAX_DEPTH` levels deep, as checked before parsing."""
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_lone_surrogate(key) or _has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
