"""Driving a segment stream (:class:`koe.pipeline.stream.SegmentStream`) as a transport would."""

from __future__ import annotations

import asyncio

from koe.pipeline.job import Part
from koe.pipeline.stream import SegmentStream

#: Longer than any fake-engine part takes to come.
WAIT_S = 30.0


async def first_part_streamed(stream: SegmentStream, text: str) -> Part | None:
    """The first part ``stream`` hands out for ``text`` added a word at a time and left unfinished (the turn
    is not flushed: more text may come); the stream is closed after."""
    for word in text.split(" "):
        stream.add(word + " ")
    try:
        async with asyncio.timeout(WAIT_S):
            return await stream.next()
    finally:
        stream.close()


async def every_part(stream: SegmentStream, wait_s: float = WAIT_S) -> list[Part]:
    """Every part ``stream`` hands out until its turn ends (within ``wait_s``); the stream is closed after."""
    parts: list[Part] = []
    try:
        async with asyncio.timeout(wait_s):
            while (part := await stream.next()) is not None:
                parts.append(part)
    finally:
        stream.close()
    return parts
