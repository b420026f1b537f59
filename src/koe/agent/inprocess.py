"""Speaking through this process's own engine: the agent's turns share the server's scheduler.

Each agent turn is a :class:`~koe.pipeline.stream.SegmentStream` read by the pipeline's
:class:`~koe.pipeline.speaker.Speaker`, exactly as a WebSocket turn is: the segmenter is fed as the LLM
writes, segment lengths follow how much audio the listener has queued, and jobs are ordered by playback
deadline across every session of the server, agent or not.

Its segments are decoded as a WebSocket turn's are: the turn's first in windows, and a later one too when
decoded whole it would come late. Each piece is passed on as a :class:`~koe.agent.base.Spoken` as soon as
it is decoded, so the agent and ``/v1/stream`` reach first speech alike for the same text at the same pace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, ExitStack
from typing import Protocol

from koe.agent.base import SegmentPieces, Spoken
from koe.audio.pcm import to_pcm16
from koe.errors import OverloadedError
from koe.pipeline.listener import Listener
from koe.pipeline.speaker import (
    SegmentAudio,
    SegmentFailed,
    SegmentStarted,
    Speaker,
    SpeechEvent,
)
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.capacity import Capacity
from koe.types import SAMPLE_RATE


class SynthesizerSource(Protocol):
    """Where the process's model is (the server's runtime): ready or not, loaded once it is, and its
    admission control, which the agent's sessions and requests pass like the server's own."""

    #: the listeners being spoken to against what the machine makes: an agent session is one of them
    capacity: Capacity

    @property
    def ready(self) -> bool: ...

    def synthesizer(self) -> Synthesizer:
        """The loaded model; raises ``OverloadedError`` while it loads or the server shuts down."""
        ...

    def admitted(self, transport: str) -> AbstractContextManager[Synthesizer]:
        """Hold one of ``transport``'s slots (``"ws"`` sessions, ``"http"`` requests) while inside;
        raises ``OverloadedError`` when every slot is taken (or not ready, or shutting down)."""
        ...


class InProcessTurn:
    """One agent turn on the shared scheduler."""

    reconnected: str | None = None  # no connection to lose

    def __init__(self, speaker: Speaker, held: ExitStack) -> None:
        self._speaker = speaker
        self._held = held  # its session's seat, counted as speaking until the turn is closed
        self._events: AsyncIterator[SpeechEvent] = speaker.events()
        self._segment: SegmentPieces | None = None  # the segment whose pieces are coming

    async def add(self, text: str) -> None:
        self._speaker.stream.add(text)

    async def finish(self) -> None:
        self._speaker.stream.finish()

    async def next(self) -> Spoken | None:
        """The next piece of a segment as PCM16; raises the segment's ``SynthesisError`` with the rest of
        that segment skipped."""
        async for event in self._events:
            match event:
                case SegmentStarted(segment=segment, words=words):
                    self._segment = SegmentPieces(
                        segment.index, segment.text, segment.source_span, SAMPLE_RATE, words
                    )
                case SegmentAudio(audio=audio, last=last) if self._segment is not None:
                    return self._segment.piece(to_pcm16(audio), last=last)
                case SegmentFailed(error=error):
                    raise error
        return None

    async def aclose(self) -> None:
        self._speaker.stream.close()
        self._held.close()


class InProcessSession:
    """One listener: its account of audio spans its turns, as a WebSocket session's does, and so does its
    seat in the account of listeners (checked at its first turn, counted while a turn is open)."""

    def __init__(self, source: SynthesizerSource) -> None:
        self._source = source
        self._listener = Listener()
        self._seat = source.capacity.seat()

    async def turn(self, voice: str, speed: float, lang: str | None = None) -> InProcessTurn:
        """Raises ``ConfigError`` for a bad voice, speed or language, ``OverloadedError`` when refused."""
        synthesizer = self._source.synthesizer()
        stream = synthesizer.stream(synthesizer.voice(voice, speed, lang), self._listener)
        held = ExitStack()
        try:
            held.enter_context(self._seat.speaking())
            stream.start()
        except OverloadedError:
            stream.close()
            held.close()
            raise
        return InProcessTurn(synthesizer.speaker(stream, "agent"), held)

    async def aclose(self) -> None:
        """Nothing to release: turns close their own jobs."""


class InProcessSpeaker:
    """The server's own engine as the agent's TTS (``koe serve``)."""

    def __init__(self, source: SynthesizerSource) -> None:
        self._source = source

    @property
    def ready(self) -> bool:
        return self._source.ready

    def admitted(self, transport: str) -> AbstractContextManager[object]:
        return self._source.admitted(transport)

    def voices(self) -> list[str]:
        return list(self._source.synthesizer().speech.voices.names()) if self._source.ready else []

    async def session(self) -> InProcessSession:
        return InProcessSession(self._source)
