"""Speaking through this process's own engine: the agent's turns share the server's scheduler.

Each agent turn is a :class:`~koe.server.synthesis.SegmentStream`, exactly as a WebSocket turn is: the
segmenter is fed as the LLM writes, segment lengths follow how much audio the listener has queued, and
jobs are ordered by playback deadline across every session of the server, agent or not.

Its segments are never windowed (``Settings.windowed``): a :class:`~koe.agent.base.Spoken` is a whole
segment (the agent's ``segment`` event carries its duration ahead of its audio), so each comes as one part
and windows would only add their overhead.
"""

from __future__ import annotations

from koe.agent.base import Spoken
from koe.audio.pcm import to_pcm16
from koe.errors import OverloadedError
from koe.params import validate_speed
from koe.scheduler.deadline import PlaybackClock
from koe.server.runtime import Runtime
from koe.server.segment_job import resolve_voice
from koe.server.synthesis import SegmentStream
from koe.text.segment import Segmenter
from koe.types import SAMPLE_RATE


class InProcessTurn:
    """One agent turn on the shared scheduler."""

    def __init__(self, stream: SegmentStream, clock: PlaybackClock, runtime: Runtime) -> None:
        self._stream = stream
        self._clock = clock
        self._runtime = runtime

    async def add(self, text: str) -> None:
        self._stream.add(text)

    async def finish(self) -> None:
        self._stream.finish()

    async def next(self) -> Spoken | None:
        """The next segment's PCM16; raises the segment's ``SynthesisError`` with that segment skipped."""
        while True:
            item = await self._stream.next()
            if item is None:
                return None
            duration = len(item.audio) / SAMPLE_RATE
            self._runtime.metrics.observe_synthesis(item.took_s, duration)
            if duration == 0:
                continue  # nothing speakable in this segment
            self._clock.delivered(duration)
            segment = item.segment
            pcm = to_pcm16(item.audio)
            return Spoken(segment.index, segment.text, segment.source_span, pcm, SAMPLE_RATE, item.words)

    async def aclose(self) -> None:
        self._stream.close()


class InProcessSession:
    """One listener: its playback clock spans its turns, as a WebSocket session's does."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._clock = PlaybackClock()

    async def turn(self, voice: str, speed: float) -> InProcessTurn:
        """Raises ``ConfigError`` for a bad voice or speed, ``OverloadedError`` when refused."""
        loaded = self._runtime.loaded()
        stream = SegmentStream(
            loaded.speech,
            self._runtime.scheduler,
            loaded.cost,
            resolve_voice(loaded.speech, voice, validate_speed(speed), None),
            self._clock,
            Segmenter(),
            lookahead=self._runtime.settings.segments_ahead,
            windowed=False,  # a Spoken is a whole segment (see the module docstring)
        )
        try:
            stream.start()
        except OverloadedError:
            stream.close()
            raise
        return InProcessTurn(stream, self._clock, self._runtime)

    async def aclose(self) -> None:
        """Nothing to release: turns close their own jobs."""


class InProcessSpeaker:
    """The server's own engine as the agent's TTS (``koe serve``)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @property
    def ready(self) -> bool:
        return self._runtime.ready

    def voices(self) -> list[str]:
        return list(self._runtime.loaded().speech.voices.names()) if self._runtime.ready else []

    async def session(self) -> InProcessSession:
        return InProcessSession(self._runtime)
