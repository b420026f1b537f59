"""Log formatting without a server: structured fields as text or JSON, secrets redacted, context merged."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from koe.logs import ContextLogger, JsonFormatter, RedactSecrets, TextFormatter, fields_of


def record(message: str, *args: object, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    made = logging.LogRecord("koe.server.session", logging.INFO, __file__, 1, message, args, exc_info)
    made.__dict__.update(extra)
    return made


def test_fields_are_exactly_what_extra_added() -> None:
    assert fields_of(record("turn ended", session="abc", turn=2)) == {"session": "abc", "turn": 2}
    assert fields_of(record("plain")) == {}


def test_json_is_one_object_per_line_with_every_field() -> None:
    line = JsonFormatter().format(record("turn %s ended", 2, session="abc", rtf=0.41, first_audio_ms=None))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["time"].endswith("+00:00")
    assert {k: entry[k] for k in ("level", "logger", "message", "session", "rtf", "first_audio_ms")} == {
        "level": "INFO",
        "logger": "koe.server.session",
        "message": "turn 2 ended",
        "session": "abc",
        "rtf": 0.41,
        "first_audio_ms": None,
    }


def test_json_keeps_a_traceback_in_its_own_field_on_the_same_line() -> None:
    line = JsonFormatter().format(record("a session failed", exc=True))
    entry = json.loads(line)
    assert entry["message"] == "a session failed"
    assert "ValueError: boom" in entry["traceback"]


def test_text_appends_fields_as_key_value_before_any_traceback() -> None:
    text = TextFormatter().format(record("turn ended", exc=True, session="abc", turn=2))
    first, *rest = text.splitlines()
    assert first.endswith("INFO koe.server.session: turn ended session=abc turn=2")
    assert "ValueError: boom" in rest[-1]


@pytest.mark.parametrize(
    ("message", "args"),
    [
        ('%s - "WebSocket %s" [accepted]', ("127.0.0.1:5", "/v1/stream?voice=af_bella&api_key=s3cret-key")),
        ("GET /agent/ws?API_KEY=s3cret-key HTTP/1.1", ()),
        ('%s - "WebSocket %s" [accepted]', ("127.0.0.1:5", "/v1/stream?api%5Fkey=s3cret-key")),
        ("GET /v1/stream?voice=a&%61pi_key=s3cret-key HTTP/1.1", ()),
    ],
)
def test_keys_in_logged_urls_are_redacted(message: str, args: tuple[object, ...]) -> None:
    made = record(message, *args)
    assert RedactSecrets().filter(made)
    assert "s3cret-key" not in made.getMessage()
    assert "[redacted]" in made.getMessage()


def test_a_context_logger_adds_its_fields_to_each_calls_extra(caplog: pytest.LogCaptureFixture) -> None:
    log = ContextLogger(logging.getLogger("koe.test"), {"session": "abc"})
    with caplog.at_level(logging.INFO, logger="koe.test"):
        log.info("turn ended", extra={"turn": 1})
        log.info("session closed")
    assert [fields_of(r) for r in caplog.records] == [{"session": "abc", "turn": 1}, {"session": "abc"}]


def test_a_control_character_in_a_logged_path_cannot_forge_a_line_of_the_text_log() -> None:
    forged = "/v1/x\n2026-01-01 00:00:00,000 INFO koe.server.session: session opened"
    line = TextFormatter().format(record("websocket %s refused: %s", forged, "forbidden_origin"))
    assert "\n" not in line
    assert "\\x0a2026-01-01" in line


def test_a_redaction_leaves_other_parameters_alone() -> None:
    made = record("GET /v1/stream?voice=af_bella&speed=1.2 HTTP/1.1")
    assert RedactSecrets().filter(made)
    assert made.getMessage() == "GET /v1/stream?voice=af_bella&speed=1.2 HTTP/1.1"
