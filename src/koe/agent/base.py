"""The two seams of the voice agent: where the answer's text comes from, and where it is spoken.

An :class:`LLMSource` streams an answer as text deltas; a :class:`Speaker` turns a turn's streamed text
into spoken segments (in this process through the scheduler, or on a remote koe/SageMaker endpoint).
Each implementation lives in its own module and imports its heavy dependencies there.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from koe.errors import ConfigError
from koe.extras import Extra, install_hint
from koe.wire.words import SpokenWord

Role = Literal["system", "user", "assistant"]


def missing_extra(module: str, extra: Extra) -> ConfigError:
    """The error for a source whose optional dependency is not installed, saying how to install it."""
    return ConfigError(
        f"this LLM source needs the {module!r} package: {install_hint(extra)}", code="missing_extra"
    )


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; the history the agent keeps and the LLM sources consume."""

    role: Role
    content: str


class LLMSource(Protocol):
    """Streams an LLM's answer to a conversation.

    Attributes:
        label: what the source is, as shown to users ("replay (simulation)", "openai-compatible: gpt-4o").
        simulated: True when no model writes the text (the replay source); shown wherever it appears.
    """

    label: str
    simulated: bool

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        """Yield the answer's text deltas as they are produced.

        Closing the iterator early (``aclose()``, or cancelling the task iterating it) stops generation
        and releases the connection or thread; that is how barge-in stops the LLM.

        Raises:
            UpstreamError: the provider refused or failed (message says which and why).
        """
        ...

    async def aclose(self) -> None:
        """Release the client or threads the source holds; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class Spoken:
    """A piece of one segment's audio, in turn order: the whole segment, or, for a segment decoded in
    windows (a turn's first, as on every streamed path), each piece as soon as it is decoded (through a
    remote TTS: each audio frame as it arrives), so that the listener hears its first word after one
    window rather than after all of it.

    Attributes:
        index: 0-based segment index within the turn.
        text: the segment's text as written by the LLM.
        source_span: ``[start, end)`` of ``text`` in the turn's full answer.
        pcm: mono 16-bit little-endian PCM.
        sample_rate: of ``pcm``.
        words: when each of its words is heard, seconds from the segment's first sample, source spans in the
            turn's answer (empty when the TTS gives no timings, and on every piece but the first).
        first: the segment's first piece (its text, span and words are announced with it).
        last: the segment's last piece: with ``first``, the piece is the whole segment. A remote TTS's
            is empty (its frames went on as they arrived; the segment's end is known only after them).
    """

    index: int
    text: str
    source_span: tuple[int, int]
    pcm: bytes
    sample_rate: int
    words: tuple[SpokenWord, ...] = ()
    first: bool = True
    last: bool = True

    @property
    def duration_s(self) -> float:
        """The piece's length."""
        return len(self.pcm) / (2 * self.sample_rate)


@dataclass(slots=True)
class SegmentPieces:
    """One segment's audio on its way to the agent, cut into :class:`Spoken` pieces as it comes: the
    first piece announces the segment (its text, span and words), every later one is audio only. Both TTS
    paths build their pieces here, so the agent sees a segment alike whichever path spoke it.

    Attributes:
        words: the segment's word timings, seconds from its first sample (set before its first piece).
    """

    index: int
    text: str
    source_span: tuple[int, int]
    sample_rate: int
    words: tuple[SpokenWord, ...] = ()
    _announced: bool = field(default=False, init=False)

    def piece(self, pcm: bytes, *, last: bool) -> Spoken:
        """The next piece, ``pcm`` (PCM16); ``last``: it completes the segment."""
        first, self._announced = not self._announced, True
        words = self.words if first else ()
        return Spoken(
            self.index, self.text, self.source_span, pcm, self.sample_rate, words, first=first, last=last
        )


class SpeakerTurn(Protocol):
    """One turn's text going in, its segments' audio coming out, in order."""

    @property
    def reconnected(self) -> str | None:
        """Why this turn runs on a new connection to a remote TTS (the previous one closed); ``None``
        when it did not change (always, in this process)."""
        ...

    async def add(self, text: str) -> None:
        """More text of the turn (any size)."""
        ...

    async def finish(self) -> None:
        """The text is complete: speak what remains."""
        ...

    async def next(self) -> Spoken | None:
        """The next piece of a segment's audio; ``None`` once the finished turn is spoken."""
        ...

    async def aclose(self) -> None:
        """Drop everything not yet returned (barge-in); idempotent, safe after cancellation."""
        ...


class SpeakerSession(Protocol):
    """A listener's connection to the TTS: turns of one conversation are spoken one after another."""

    async def turn(self, voice: str, speed: float, lang: str | None = None) -> SpeakerTurn:
        """Open the next turn, its text read as ``lang`` (None: the voice's language).

        Raises:
            VoiceError: unknown voice. OverloadedError: the TTS refused work. UpstreamError: a remote
            TTS is unreachable.
        """
        ...

    async def aclose(self) -> None:
        """Release the session (a remote connection); idempotent."""
        ...


class Speaker(Protocol):
    """Opens TTS sessions; ``ready`` says whether it can speak now (for ``/ping``)."""

    @property
    def ready(self) -> bool: ...

    def admitted(self, transport: str) -> AbstractContextManager[object]:
        """Hold one of the TTS's slots while inside: ``"ws"`` for a browser session, ``"http"`` for a
        request. Raises ``OverloadedError`` when the TTS refuses (every slot taken, not ready)."""
        ...

    def voices(self) -> list[str]:
        """The voice names a turn may use."""
        ...

    async def session(self) -> SpeakerSession: ...
