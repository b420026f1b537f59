"""Helpers for the agent's Server-Sent Events (imported as ``sse_events``; tests/ is on pytest's path)."""

from __future__ import annotations

import json
from typing import Any

import httpx

#: Three sentences of different lengths: the first is spoken while the others are still being "written".
THREE_SENTENCES = (
    "The first sentence is short. The second one takes a little longer to write. And the third ends it."
)


def segment_words(text: str, events: list[dict[str, Any]]) -> list[str]:
    """The words of the agent's ``segment`` events among a turn's ``events``, checked: each within its
    segment's audio (seconds from the segment's first sample: its ``duration_s``, or for a segment whose
    audio came in pieces, their length), in order, its ``source_span`` pointing at itself in the answer
    ``text``."""
    found = []
    for segment in (e for e in events if e["type"] == "segment"):
        length_s = segment["duration_s"]
        if length_s is None:
            pieces = [e for e in events if e["type"] == "audio" and e["index"] == segment["index"]]
            length_s = sum(e["bytes"] / (2 * e["sample_rate"]) for e in pieces)
        end = 0.0
        for word in segment["words"]:
            a, b = word["source_span"]
            assert text[a:b] == word["word"]
            assert end <= word["start_s"] < word["end_s"] <= length_s
            end = word["end_s"]
            found.append(word["word"])
    return found


def sse_events(response: httpx.Response) -> list[dict[str, Any]]:
    """Parse a Server-Sent Events body: each event's ``event:`` must match its JSON ``type``."""
    events = []
    for block in response.text.split("\n\n"):
        if not block:
            continue
        kind, data = block.split("\n")
        assert kind.startswith("event: ") and data.startswith("data: ")
        event = json.loads(data.removeprefix("data: "))
        assert event["type"] == kind.removeprefix("event: ")
        events.append(event)
    return events
