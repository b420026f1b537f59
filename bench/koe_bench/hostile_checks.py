"""What the hostile clients check of every answer: a refusal with its documented status and code, in
whichever shape the route answers, and a turn heard to its end after an attack.

Each check raises ``UpstreamError`` when the server answers otherwise, so a soak counts a client failure.
"""

from __future__ import annotations

import json

import httpx
from websockets.asyncio.client import ClientConnection

from koe.errors import UpstreamError

#: One short sentence, the hostile clients' text: a turn of it is heard to its end in little time.
SPOKEN = "Hello there, this is a short answer."


def _error_code(response: httpx.Response) -> str:
    """koe's error code in whichever shape the route answers: Deepgram's, OpenAI's or koe's own."""
    body = response.json()
    if "err_code" in body:
        return str(body["err_code"])
    error = body.get("error")
    return str(error["code"] if isinstance(error, dict) else error)


def expect_refusal(response: httpx.Response, status: int, code: str) -> None:
    """``response`` is ``status`` with the error ``code``."""
    if response.status_code != status or _error_code(response) != code:
        raise UpstreamError(f"expected {status} {code}, got {response.status_code} {response.text[:200]}")


async def speaks(ws: ClientConnection, text: str = SPOKEN) -> None:
    """A turn of ``text`` on ``/v1/stream``'s ``ws`` heard to its end, with audio and without an error."""
    await ws.send(json.dumps({"type": "append", "text": text}))
    await ws.send(json.dumps({"type": "flush"}))
    heard = 0
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            heard += len(frame)
        elif (message := json.loads(frame))["type"] == "error":
            raise UpstreamError(f"a turn after an attack got {message}")
        elif message["type"] == "flushed":
            if not heard:
                raise UpstreamError("a turn after an attack ended without audio")
            return
