"""What a session's writer sends next: control replies first, then turn data in order, bounded in seconds.

This counts only what waits for the socket (a memory bound and the backpressure on a slow client); what
the listener has in hand is :class:`koe.pipeline.listener.Listener`'s account.

Control replies (``config``, ``cancelled``, errors) never wait behind queued audio. Turn data (segment
messages, audio frames, end-of-turn replies) keeps its order and carries its turn number, so a cancel
removes a turn's unsent data in one call. Queued audio is counted in seconds: producers wait at
:meth:`room` once it passes the high-water mark, until the writer brings it under the low-water mark.
Messages (everything but audio) are counted too, so that the session can close on a client that keeps
sending but never reads its replies (:attr:`unsent_messages`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CloseRequest:
    """Close the socket with ``code`` once everything queued before this is sent."""

    code: int
    reason: str = ""


Payload = str | bytes | CloseRequest


@dataclass(frozen=True, slots=True)
class _Data:
    turn: int
    payload: Payload
    audio_s: float


class Outbox:
    """A session's outgoing queue. Not thread-safe: used from the event loop only."""

    def __init__(self, high_water_s: float, low_water_s: float) -> None:
        self._high = high_water_s
        self._low = low_water_s
        self._control: deque[Payload] = deque()
        self._data: deque[_Data] = deque()
        self._audio_s = 0.0
        self._messages = 0  # queued payloads that are not audio
        self._nonempty = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()

    @property
    def unsent_messages(self) -> int:
        """Replies and turn messages (not audio frames) waiting for the socket."""
        return self._messages

    @property
    def paused(self) -> bool:
        """Whether producers wait: queued audio passed the high-water mark and is not under the low yet."""
        return not self._has_room.is_set()

    def control(self, payload: Payload) -> None:
        """Queue a reply that goes out before any queued turn data."""
        self._control.append(payload)
        self._messages += 1
        self._nonempty.set()

    def data(self, turn: int, payload: Payload, audio_s: float = 0.0) -> None:
        """Queue turn data (in order); ``audio_s`` is the audio it carries."""
        self._data.append(_Data(turn, payload, audio_s))
        self._audio_s += audio_s
        self._messages += not audio_s
        if self._audio_s >= self._high:
            self._has_room.clear()
        self._nonempty.set()

    def drop_turns(self, turns: set[int]) -> None:
        """Forget every unsent item of ``turns`` (a cancel)."""
        kept = deque(item for item in self._data if item.turn not in turns)
        self._data = kept
        self._audio_s = sum(item.audio_s for item in kept)
        self._messages = len(self._control) + sum(not item.audio_s for item in kept)
        self._update_room()

    async def get(self) -> Payload:
        """The next payload to send (waits while empty)."""
        while not (self._control or self._data):
            self._nonempty.clear()
            await self._nonempty.wait()
        if self._control:
            self._messages -= 1
            return self._control.popleft()
        item = self._data.popleft()
        self._messages -= not item.audio_s
        self._audio_s = self._audio_s - item.audio_s if self._data else 0.0  # no float drift when empty
        self._update_room()
        return item.payload

    async def room(self) -> None:
        """Wait while queued audio is over the high-water mark, until it is under the low-water mark."""
        await self._has_room.wait()

    def _update_room(self) -> None:
        if self._audio_s <= self._low:
            self._has_room.set()
