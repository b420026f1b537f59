"""Logs of a live server: one summary line per turn and per request, every session line with its id, and
no user text at INFO."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.logs import JsonFormatter, TextFormatter
from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine, fake_seconds
from ws_events import WAIT_S, of_type, run, send, until

#: Words that appear nowhere in koe's own messages, so finding one in a log means user text leaked.
FIRST = "Zebras quietly juggle marmalade."
SECOND = (
    "Walruses compose sonnets about turquoise lighthouses. Meanwhile, hedgehogs recite limericks. "
    "Nobody expected the flamingos to applaud so loudly at the end of the evening."
)
HTTP_TEXT = "Porcupines whistle politely."
PRIVATE = ("Zebras", "marmalade", "Walruses", "turquoise", "flamingos", "Porcupines", "whistle")


def wait_for(records: Callable[[], list[logging.LogRecord]]) -> list[logging.LogRecord]:
    """The records once there are some: a session's last lines are written after its client has left."""
    deadline = time.monotonic() + WAIT_S
    while not (found := records()):
        assert time.monotonic() < deadline, "the expected log line never came"
        time.sleep(0.05)
    return found


def assert_no_user_text(records: list[logging.LogRecord]) -> None:
    for formatter in (TextFormatter(), JsonFormatter()):
        written = "\n".join(formatter.format(r) for r in records)
        assert not [word for word in PRIVATE if word in written]


#: Each fake engine call's time in the turn test: the turn's synthesis time is at least calls x this.
ENGINE_CALL_S = 0.02


def test_each_turn_logs_one_line_with_its_session_counts_and_outcome(
    serve_fake: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    engine = FakeEngine(delay_s=ENGINE_CALL_S)
    first_calls = 0

    async def main(live: LiveServer) -> tuple[str, dict[str, object]]:
        nonlocal first_calls
        async with connect(live.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "config"})
            (ack,) = await until(ws, of_type("config"))
            await send(ws, {"type": "append", "text": FIRST})
            await send(ws, {"type": "flush"})
            *_, flushed = await until(ws, of_type("flushed"))
            first_calls = engine.calls
            await send(ws, {"type": "append", "text": SECOND})
            await send(ws, {"type": "flush"})
            await until(ws, of_type("segment"))
            await send(ws, {"type": "cancel"})
            await until(ws, of_type("cancelled"))
        assert isinstance(ack, dict) and isinstance(flushed, dict)
        return str(ack["session"]), flushed

    with caplog.at_level(logging.INFO), serve_fake(engine) as live:
        session, flushed = run(lambda: main(live))
        mine = lambda: [r for r in caplog.records if getattr(r, "session", None) == session]  # noqa: E731
        wait_for(lambda: [r for r in mine() if r.getMessage() == "session closed"])
    turns = [r for r in mine() if r.getMessage() == "turn ended"]
    assert [(r.__dict__["turn"], r.__dict__["outcome"]) for r in turns] == [(0, "flushed"), (1, "cancelled")]
    line = turns[0].__dict__
    assert line["chars"] == len(FIRST)
    assert line["segments"] == 1  # one sentence
    assert line["audio_s"] == pytest.approx(fake_seconds(FIRST), abs=0.002)
    assert line["audio_s"] == pytest.approx(flushed["audio_s"], abs=0.002)
    assert line["first_audio_ms"] == pytest.approx(flushed["ttfa_ms"], abs=1.0)
    assert line["rtf"] >= first_calls * ENGINE_CALL_S / line["audio_s"] - 0.001  # synthesis time / audio
    assert turns[1].__dict__["chars"] == len(SECOND)
    session_lines = [r for r in caplog.records if r.name == "koe.server.session"]
    assert all(hasattr(r, "session") for r in session_lines)  # every session line carries its id
    assert {"session opened", "session closed"} <= {r.getMessage() for r in mine()}
    assert_no_user_text(caplog.records)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/invocations", {"text": HTTP_TEXT, "stream": False}),
        (
            "/v1/audio/speech",
            {"model": "tts-1", "input": HTTP_TEXT, "voice": "alloy", "response_format": "pcm"},
        ),
    ],
    ids=["whole", "streamed"],
)
def test_each_http_request_logs_one_line_when_its_response_ends(
    fake_server: LiveServer, caplog: pytest.LogCaptureFixture, path: str, body: dict[str, object]
) -> None:
    ended = lambda: [r for r in caplog.records if r.getMessage() == "request ended"]  # noqa: E731
    with caplog.at_level(logging.INFO):
        response = httpx.post(fake_server.http_url + path, json=body, timeout=WAIT_S)
        assert response.status_code == 200
        (line,) = wait_for(ended)
    fields = line.__dict__
    assert (fields["outcome"], fields["chars"]) == ("completed", len(HTTP_TEXT))
    assert fields["segments"] == 1 and fields["rtf"] > 0
    assert fields["audio_s"] == pytest.approx(fake_seconds(HTTP_TEXT), abs=0.002)
    assert fields["first_audio_ms"] > 0 and len(fields["request"]) == 12
    assert_no_user_text(caplog.records)


#: Hostile input, in no message of koe's own: the Cyrillic one is quoted back to the client in the
#: ``unsupported_script`` error (a sample of the text), the Latin one in other errors' messages.
SECRET = "Секретный"
MARKER = "Xylophonistic"
HOSTILE = (SECRET, MARKER)
#: The test's own clients, which log what they send at DEBUG.
CLIENT_LOGGERS = ("httpx", "httpcore", "websockets")


def test_refusals_and_failures_log_their_codes_never_the_text_that_caused_them(
    fake_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every route's refusal, a session's errors and a failed segment: the client hears the message (which
    quotes its text), the log gets the code, at any level."""
    url = fake_server.http_url
    quoted: list[str] = []

    async def session() -> None:
        async with connect(fake_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": f"Read {SECRET} aloud."})
            await send(ws, {"type": "flush"})
            (error, *_) = [m for m in await until(ws, of_type("flushed")) if m["type"] == "error"]
            await send(ws, {"type": MARKER})
            (invalid,) = await until(ws, of_type("error"))
        assert isinstance(error, dict) and isinstance(invalid, dict)
        quoted.extend([error["message"], invalid["message"]])

    with caplog.at_level(logging.DEBUG), httpx.Client(base_url=url, timeout=WAIT_S) as client:
        refused = [
            client.post("/invocations", json={"text": f"Read {SECRET}."}),
            client.post("/v1/audio/speech", json={"model": "tts-1", "input": SECRET, "voice": "alloy"}),
            client.post("/v1/speak", json={"text": SECRET}),
            client.post("/invocations", json={"text": "Hi.", "voice": MARKER}),
            client.post("/agent/invocations", json={"read": "Hi.", "lang": MARKER}),
            client.post("/invocations", json={"text": "Hi."}, headers={"Origin": f"http://{MARKER}.example"}),
            client.post("/invocations", json={"text": "Hi."}, headers={"Host": f"{MARKER}.example"}),
        ]
        failed = client.post("/invocations", json={"text": f"{MARKER} kaboom.", "format": "pcm"})
        run(session)
        wait_for(lambda: [r for r in caplog.records if getattr(r, "code", None) == "invalid_message"])
    assert [r.status_code for r in refused] == [400, 400, 400, 400, 400, 403, 403]
    assert failed.status_code == 200
    quoted += [response.text for response in refused]
    assert all(any(hostile in message for hostile in HOSTILE) for message in quoted)  # the control
    codes = {getattr(r, "code", None) for r in caplog.records}
    assert {
        "unsupported_script",
        "unknown_voice",
        "invalid_message",
        "forbidden_origin",
        "forbidden_host",
    } <= codes
    assert "synthesis_failed" in codes  # the failed segment
    server = [r for r in caplog.records if r.name.split(".")[0] not in CLIENT_LOGGERS]
    for formatter in (TextFormatter(), JsonFormatter()):
        written = "\n".join(formatter.format(r) for r in server)
        assert not [hostile for hostile in HOSTILE if hostile in written]
