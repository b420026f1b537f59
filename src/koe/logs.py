"""How koe's log records look: fields passed in ``extra`` become ``key=value`` text or JSON keys.

Modules log with ``logging.getLogger(__name__)`` and put what a machine should read (session, turn,
durations) in ``extra``; the CLI, the only place that configures logging, picks :class:`TextFormatter`
or :class:`JsonFormatter` and adds :class:`RedactSecrets`. Nothing here touches the root logger.

A log line holds codes, lengths, counts, durations, ids, voices and paths, never what a client wrote (its
text, a message's content) nor a key: an error told to a client is logged by :func:`log_refusal`, without
its message, which may quote what the client sent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from koe.errors import KoeError

#: Attributes every record has (and uvicorn's ANSI-coloured copy of its message); anything else on a
#: record came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}
#: A query parameter in a logged URL (uvicorn logs paths with their query, still percent-encoded).
_QUERY_PARAMETER = re.compile(r"([?&])([^=&\s\"'?]+)=([^&\s\"']*)")
#: The parameter that carries a key, as the server reads it: after percent-decoding (``api%5Fkey``).
_SECRET_PARAMETER = "api_key"
#: Control characters a client may smuggle into a logged path (``%0A``) would forge lines of a text log.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record was logged with (its ``extra``), in the order given."""
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """The usual one-line text, followed by each structured field as ``key=value``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        line += "".join(f" {key}={value}" for key, value in fields_of(record).items())
        return line.translate(_CONTROLS)  # one record, one line: a traceback follows on lines of its own


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, fields, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _redacted(match: re.Match[str]) -> str:
    separator, name, _value = match.groups()
    if unquote_plus(name).lower() != _SECRET_PARAMETER:
        return match.group()
    return f"{separator}{name}=[redacted]"


class RedactSecrets(logging.Filter):
    """Hides API keys that clients put in URLs (``?api_key=``, in any percent-encoding the server would
    accept) before any handler writes them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "=" in message:
            redacted = _QUERY_PARAMETER.sub(_redacted, message)
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed fields (a session's id) to every record, merged with the call's ``extra``."""

    def __init__(self, logger: logging.Logger, context: Mapping[str, object]) -> None:
        super().__init__(logger, dict(context))

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def log_refusal(
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
    where: str,
    error: KoeError,
    *,
    level: int = logging.INFO,
) -> None:
    """Log an error a client is answered with: ``where`` (a route, a session's step), the error's code and
    the request field it is about, if any. Never its message, which may quote the client's text (a script
    sample, a word G2P failed on) or a header it sent."""
    fields = {"code": error.code} if error.param is None else {"code": error.code, "param": error.param}
    logger.log(level, "%s", where, extra=fields)
