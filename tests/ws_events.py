"""Helpers for talking to a live koe server over WebSocket: events are JSON dicts or audio bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from websockets.asyncio.client import ClientConnection

T = TypeVar("T")
Event = dict[str, Any] | bytes
#: A bound for waits on a loaded 2-core machine; a healthy run never gets near it.
WAIT_S = 120.0


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(WAIT_S * 2):
            return await main()

    return asyncio.run(bounded())


async def send(ws: ClientConnection, message: dict[str, Any], *, binary: bool = False) -> None:
    text = json.dumps(message)
    await ws.send(text.encode() if binary else text)


async def receive(ws: ClientConnection) -> Event:
    async with asyncio.timeout(WAIT_S):
        frame = await ws.recv()
    return json.loads(frame) if isinstance(frame, str) else frame


async def until(ws: ClientConnection, done: Callable[[dict[str, Any]], bool]) -> list[Event]:
    """Every event up to and including the first JSON message for which ``done`` is true."""
    events: list[Event] = []
    while True:
        event = await receive(ws)
        events.append(event)
        if isinstance(event, dict) and done(event):
            return events


def of_type(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("type") == kind


def messages(events: list[Event]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict)]


def audio(events: list[Event]) -> bytes:
    return b"".join(e for e in events if isinstance(e, bytes))


def shape(events: list[Event]) -> list[str]:
    """The sequence of event kinds with runs of audio collapsed: ``["segment", "audio", "segment_end"]``."""
    kinds: list[str] = []
    for event in events:
        kind = "audio" if isinstance(event, bytes) else str(event.get("type"))
        if not (kind == "audio" and kinds and kinds[-1] == "audio"):
            kinds.append(kind)
    return kinds
