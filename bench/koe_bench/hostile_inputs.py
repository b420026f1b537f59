"""The soak's hostile clients for issue 31's classes: a compression offer and a compressed frame, a message
in endless empty fragments, numbers thousands of digits long, unheaderable Deepgram queries, an oversize
request id, bodies of a media type no route reads, the key under a percent-encoded name, and a refused path
that would forge a log line.

Each action raises ``UpstreamError`` when the server answers otherwise than documented and then checks that
the server (the same session, where one survives) still speaks. What only the server's log can show (the
key never written, no forged line) is checked by :func:`log_findings` on the log of a soaked server.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from urllib.parse import quote

import httpx
from websockets.asyncio.client import connect

from koe.errors import UpstreamError
from koe.server.connections import MAX_FRAGMENTS_PER_MESSAGE
from koe.wire.fields import MAX_REQUEST_ID_CHARS
from koe_bench.hostile_checks import SPOKEN, expect_refusal, speaks
from koe_bench.rawclient import (
    CONTINUATION,
    TEXT,
    address,
    client_frame,
    close_code,
    closed_within,
    open_raw,
    raw_websocket,
    upgrade,
    ws_url,
)

#: What a client puts where the key goes; a log that holds it leaks keys.
KEY_MARKER = "soak-key-0f1e2d3c4b5a69788796a5b4"
#: A well-formed line of the text log, smuggled into a refused path; a log line starting with it is forged.
FORGED_LINE = "2026-01-01 00:00:00,000 INFO koe.server.session: forged by a hostile soak client"
#: How long the server may take to answer a refusal or close a socket.
_ANSWER_WITHIN_S = 15.0
_PROTOCOL_ERROR, _TOO_BIG = 1002, 1009
#: The issue's long numbers: a price with 4,400 decimals (Japanese), 5,000 digits (English).
#: voice → a text with a very long number, and the next turn's text in that voice's language
LONG_NUMBERS = {
    "jf_alpha": (f"Total $1.{'5' * 4400} ok.", "Okay."),
    "af_heart": (f"The number is {'5' * 5000} ok.", "Okay."),
    # no currency symbol: the money rule once read a run like this in quadratic time
    "zf_xiaobei": (f"号码是{'5' * 4400}。", "好的。"),
}


async def _session_speaks(base: str) -> None:
    async with connect(ws_url(base) + "/v1/stream") as ws:
        await speaks(ws)


async def _closed_with(
    base: str, expected: int, what: str, frames: Callable[[bytes], bytes], extra: str = ""
) -> None:
    """A raw WebSocket (``extra`` lines in its upgrade) is sent ``frames(answer)``, given the server's answer
    to the upgrade (raising where that answer is wrong): the server must close it with ``expected``, and a
    new session must speak."""
    reader, writer, answer = await raw_websocket(base, extra=extra)
    try:
        writer.write(frames(answer))
        code = close_code(await closed_within(reader, _ANSWER_WITHIN_S))
    finally:
        writer.transport.abort()
    if code != expected:
        raise UpstreamError(f"expected close {expected} for {what}, got {code}")
    await _session_speaks(base)


async def compressed_frame(base: str, http: httpx.AsyncClient) -> None:
    """A permessage-deflate offer is declined, and a frame compressed anyway (RSV1: a 100 KB deflate bomb in
    a hundred bytes) is a protocol error, closed 1002 without being inflated."""

    def bomb(answer: bytes) -> bytes:
        if b"permessage-deflate" in answer.lower():
            raise UpstreamError("the server negotiated permessage-deflate")
        squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate, as the extension frames it
        deflated = squeeze.compress(b"\0" * 100_000) + squeeze.flush(zlib.Z_SYNC_FLUSH)[:-4]
        return client_frame(TEXT, deflated, rsv1=True)

    offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    await _closed_with(base, _PROTOCOL_ERROR, "a compressed frame", bomb, extra=offer)


async def empty_fragments(base: str, http: httpx.AsyncClient) -> None:
    """A text message continued by twice as many empty fragments as one may have: closed 1009."""

    def fragments(answer: bytes) -> bytes:
        empty = client_frame(CONTINUATION, b"", fin=False)
        return client_frame(TEXT, b"{", fin=False) + empty * (2 * MAX_FRAGMENTS_PER_MESSAGE)

    await _closed_with(base, _TOO_BIG, "endless fragments", fragments)


async def long_numbers(base: str, http: httpx.AsyncClient) -> None:
    """A number thousands of digits long, in Japanese, English and Mandarin: its audio comes, a cancel ends
    the turn, and the session's next turn speaks (its worker was freed)."""
    for voice, (text, then) in LONG_NUMBERS.items():
        async with connect(f"{ws_url(base)}/v1/stream?voice={voice}") as ws:
            await ws.send(json.dumps({"type": "append", "text": text}))
            await ws.send(json.dumps({"type": "flush"}))
            while not isinstance(frame := await ws.recv(), bytes):
                if json.loads(frame)["type"] == "error":
                    raise UpstreamError(f"a long number in {voice}'s language got {frame}")
            await ws.send(json.dumps({"type": "cancel"}))
            while isinstance(frame := await ws.recv(), bytes) or json.loads(frame)["type"] != "cancelled":
                pass
            await speaks(ws, then)


#: Deepgram REST queries whose ``model`` no header can carry, or whose ``sample_rate`` passes
#: ``str.isdigit`` and not ``int``.
_DEEPGRAM_QUERIES = (
    "voice=af_heart&model=" + quote("af_heart\r\nX-Smuggled: yes"),
    "voice=af_heart&model=" + quote("\U0001f600"),
    "voice=af_heart&model=" + quote("\u3000"),
    "encoding=linear16&sample_rate=" + quote("\u00b2"),
    "encoding=linear16&sample_rate=" + "9" * 5000,
)


async def deepgram_queries(base: str, http: httpx.AsyncClient) -> None:
    """Each query 400 invalid_field before any synthesis; then the route speaks."""
    for query in _DEEPGRAM_QUERIES:
        expect_refusal(
            await http.post(f"{base}/v1/speak?{query}", json={"text": "Hi."}), 400, "invalid_field"
        )
    spoken = await http.post(f"{base}/v1/speak?encoding=linear16", json={"text": SPOKEN})
    if spoken.status_code != 200 or not spoken.content:
        raise UpstreamError(f"/v1/speak answered {spoken.status_code} after the refusals")


async def long_request_id(base: str, http: httpx.AsyncClient) -> None:
    """A request id one character over the bound on ``/invocations``: 400 invalid_message, nothing echoed;
    then one at the bound is spoken."""
    for chars, status in ((MAX_REQUEST_ID_CHARS + 1, 400), (MAX_REQUEST_ID_CHARS, 200)):
        body = {"text": SPOKEN, "format": "pcm", "request_id": "r" * chars}
        response = await http.post(base + "/invocations", json=body)
        if status == 400:
            expect_refusal(response, 400, "invalid_message")
        elif response.status_code != 200 or not response.content:
            raise UpstreamError(f"/invocations answered {response.status_code} to a bounded request id")


async def foreign_media(base: str, http: httpx.AsyncClient) -> None:
    """Plain text and form bodies to the JSON-only routes: 415 unsupported_media_type each."""
    for path in ("/v1/speak", "/agent/invocations"):
        for media_type in ("text/plain", "application/x-www-form-urlencoded"):
            response = await http.post(
                base + path, content=b"text=Hello+there.", headers={"Content-Type": media_type}
            )
            expect_refusal(response, 415, "unsupported_media_type")
    await _session_speaks(base)


async def encoded_key_names(base: str, http: httpx.AsyncClient) -> None:
    """The key under ``api%5Fkey`` and ``%61pi_key`` (the server reads both as ``api_key``): the session
    opens and speaks; the soak checks that the key never reached the log."""
    for name in ("api%5Fkey", "%61pi_key"):
        async with connect(f"{ws_url(base)}/v1/stream?{name}={KEY_MARKER}") as ws:
            await speaks(ws)


async def forged_log_line(base: str, http: httpx.AsyncClient) -> None:
    """A foreign page's WebSocket to a path holding a percent-encoded newline and a log line: 403
    forbidden_origin; the soak checks that no line of the log starts with the smuggled one."""
    host, port = address(base)
    path = "/v1/stream%0A" + quote(FORGED_LINE)
    reader, writer = await open_raw(base)
    writer.write(upgrade(f"{host}:{port}", path, "Origin: https://evil.example.net\r\n"))
    answer = await closed_within(reader, _ANSWER_WITHIN_S)
    writer.close()
    if not answer.startswith(b"HTTP/1.1 403") or b"forbidden_origin" not in answer:
        raise UpstreamError(f"expected 403 forbidden_origin, got {answer[:200]!r}")


INPUT_ACTIONS = (
    compressed_frame,
    empty_fragments,
    long_numbers,
    deepgram_queries,
    long_request_id,
    foreign_media,
    encoded_key_names,
    forged_log_line,
)


def log_findings(log: str) -> dict[str, int]:
    """What a soaked server's log must not hold: the key the clients sent, lines forged through a path."""
    return {
        "key_in_log": log.count(KEY_MARKER),
        "forged_lines": sum(line.startswith(FORGED_LINE) for line in log.splitlines()),
    }
