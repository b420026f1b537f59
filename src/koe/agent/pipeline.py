"""The voice-agent pipeline: an LLM's deltas → the TTS turn → audio events, with barge-in and history.

One :class:`AgentSession` per conversation. Each turn runs as one task with two halves in a TaskGroup:
the text half feeds LLM deltas to the TTS turn (which segments them as they come), the audio half emits
each segment's audio as soon as it is synthesized. An interrupt — or the next question — cancels that
task, which closes the LLM stream and drops the TTS turn's queued work in one step, and drops the events
not yet taken by the client. The history then keeps only what the listener heard, cut at segment ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from koe.agent.base import LLMSource, Message, SpeakerSession, SpeakerTurn
from koe.agent.events import (
    AgentEvent,
    AudioReady,
    Interrupted,
    Reconnected,
    SegmentReady,
    TextDelta,
    Timings,
    TurnDone,
    TurnError,
    TurnStarted,
)
from koe.agent.sentences import SentenceGate
from koe.errors import ConfigError, KoeError, LimitError, SynthesisError
from koe.languages import DEFAULT, Language, language, of_voice
from koe.logs import log_refusal

logger = logging.getLogger(__name__)

#: ``{language}`` is the turn's language by its own name ("日本語"), so the LLM answers in what the voice
#: speaks. Plain short sentences because they are heard, not read: a list or an emoji has no sound, and a
#: small model asked for brevity still repeats itself unless told not to.
DEFAULT_SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Your answer is spoken aloud: answer in two or three short "
    "sentences of plain conversational {language}. Do not use lists, markdown, code or emoji, and do not "
    "repeat yourself."
)


def system_prompt(template: str, lang: Language) -> str:
    """The system prompt for a turn in ``lang``: ``{language}`` filled in, or, for a prompt without it
    and a language other than English, a last line asking for that language."""
    if "{language}" in template:
        return template.replace("{language}", lang.native)
    if lang.family == DEFAULT.family:
        return template
    return f"{template}\nAlways answer in {lang.name} ({lang.native})."


def turn_language(voice: str, lang: str | None) -> Language:
    """The language a turn speaks: ``lang`` when given, else the voice's (its first letter, as Kokoro's).

    Raises:
        ConfigError: ``lang`` is no Kokoro language.
    """
    return language(lang) if lang is not None else of_voice(voice.strip()) or DEFAULT


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """Limits and defaults of every session; all finite.

    Attributes:
        system_prompt: sent first in every conversation; ``{language}`` becomes the turn's language.
        max_history_messages: the most user/assistant messages kept (oldest exchanges drop first).
        max_prompt_chars: the longest question (or read-aloud text) accepted.
        max_answer_chars: an answer is cut here (the LLM stream is closed) and this is reported.
        max_answer_sentences: an LLM's answer ends after this many sentences (the stream is closed); it is
            passed on in whole sentences, none said twice (:mod:`koe.agent.sentences`). Read-aloud text
            (a simulated source) is spoken as given.
        event_buffer: events queued between a turn and its client; a slow client pauses the turn.
        default_voice: the voice when a request names none.
    """

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_history_messages: int = 16
    max_prompt_chars: int = 4000
    max_answer_chars: int = 8000
    max_answer_sentences: int = 3
    event_buffer: int = 16
    default_voice: str = "af_heart"

    def __post_init__(self) -> None:
        limits = ("max_history_messages", "max_prompt_chars", "max_answer_chars", "max_answer_sentences")
        for name in (*limits, "event_buffer"):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"agent option {name}: expected an integer >= 1, got {getattr(self, name)}",
                    code="invalid_field",
                )


@dataclass(eq=False, slots=True)
class AgentTurn:
    """One question and its answer while it is being spoken; dropped when the next turn starts."""

    number: int
    prompt: str
    source: LLMSource
    voice: str
    speed: float
    lang: Language
    events: asyncio.Queue[AgentEvent]
    started: float = field(default_factory=time.monotonic)
    answer: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)  # segments whose audio was emitted
    taken: int = 0  # segments whose audio the client has taken from the queue (a count, as ``spans``)
    taken_index: int | None = None  # the segment of the audio it took last (its pieces count once)
    audio_s: float = 0.0
    first_token: float | None = None
    first_audio: float | None = None
    text_done: float | None = None
    delivered: bool = False  # ``done`` was taken by the client
    history_at: int | None = None  # where its exchange sits in the history once committed
    task: asyncio.Task[None] | None = None

    def ms(self, at: float | None) -> float | None:
        return None if at is None else round((at - self.started) * 1000, 1)

    def done_event(self, kept: str, *, interrupted: bool) -> TurnDone:
        timings = Timings(
            self.ms(self.first_token),
            self.ms(self.first_audio),
            self.ms(self.text_done),
            self.ms(time.monotonic()),
        )
        return TurnDone(
            self.number, kept, interrupted, round(self.audio_s, 3), timings, self.source.simulated
        )


SpeakerOpener = Callable[[], Awaitable[SpeakerSession]]


class AgentSession:
    """A conversation: its history, its TTS session, and the turn being (or last) spoken.

    Used from the event loop only. The TTS session is opened by ``open_speaker`` on the first turn and
    closed by :meth:`aclose`.
    """

    def __init__(
        self, options: AgentOptions, open_speaker: SpeakerOpener, session_id: str | None = None
    ) -> None:
        self.id = session_id or uuid.uuid4().hex[:12]
        self.history: list[Message] = []
        self._options = options
        self._open_speaker = open_speaker
        self._speaker: SpeakerSession | None = None
        self._turns = 0
        self._current: AgentTurn | None = None
        self._last_task: asyncio.Task[None] | None = None  # the latest turn's task, until it has cleaned up

    async def start(
        self,
        prompt: str,
        source: LLMSource,
        *,
        voice: str | None = None,
        speed: float = 1.0,
        lang: str | None = None,
    ) -> AgentTurn:
        """Begin a turn (interrupting the one being spoken) and return it; read it with :meth:`events`.

        The LLM is asked to answer in the turn's language: ``lang``, or the voice's.

        Raises:
            ConfigError: empty prompt or unknown ``lang``. LimitError: prompt over ``max_prompt_chars``.
        """
        if not prompt.strip():
            raise ConfigError("expected a non-empty prompt", code="invalid_field")
        if len(prompt) > self._options.max_prompt_chars:
            raise LimitError(
                f"prompt of {len(prompt)} characters is over the limit of {self._options.max_prompt_chars}",
                code="text_too_long",
            )
        voice = voice or self._options.default_voice
        spoken = turn_language(voice, lang)
        await self.interrupt()
        turn = AgentTurn(
            self._turns, prompt, source, voice, speed, spoken, asyncio.Queue(self._options.event_buffer)
        )
        self._turns += 1
        instructions = system_prompt(self._options.system_prompt, spoken)
        messages = [Message("system", instructions), *self.history, Message("user", prompt)]
        self._current = turn
        turn.task = asyncio.create_task(self._run(turn, messages), name=f"koe-agent-{self.id}-{turn.number}")
        self._last_task = turn.task
        return turn

    async def events(self, turn: AgentTurn) -> AsyncIterator[AgentEvent]:
        """The turn's events up to its ``done``. Closing this early (the client left) interrupts the turn."""
        try:
            while not turn.delivered:
                event = await turn.events.get()
                if isinstance(event, AudioReady) and event.index != turn.taken_index:
                    # segments heard, not the last index: a failed segment has no audio
                    turn.taken, turn.taken_index = turn.taken + 1, event.index
                turn.delivered = isinstance(event, TurnDone)
                yield event
        finally:
            if self._current is turn and not turn.delivered:
                self._stop(None)  # no await here: a cancelled caller may not get to run one

    async def interrupt(self, heard_segments: int | None = None) -> Interrupted | None:
        """Barge-in: stop the current turn now and keep in the history only what was heard.

        Also valid after the turn finished writing: the listener may still be playing its audio.
        Returns once the turn's LLM stream and TTS turn are closed.

        Args:
            heard_segments: how many of the turn's segments the listener started hearing (the browser
                knows); default: those whose audio the client has taken.

        Returns:
            What the history now keeps of the turn, or ``None`` when there is no turn to interrupt. A turn
            whose ``done`` was not yet taken gets a new one with ``interrupted: true``; the events it had
            not sent are dropped.
        """
        result = self._stop(heard_segments)
        if self._last_task is not None and not self._last_task.done():
            await asyncio.wait([self._last_task])
        return result

    def _stop(self, heard_segments: int | None) -> Interrupted | None:
        """The synchronous part of :meth:`interrupt`: cancel, drop unsent events, trim the history."""
        turn, self._current = self._current, None
        if turn is None:
            return None
        if turn.task is not None:
            turn.task.cancel()  # a finished task ignores this; a running one stops at its next await
        while not turn.events.empty():  # audio not yet sent is never sent
            turn.events.get_nowait()
        heard = turn.taken if heard_segments is None else max(0, min(heard_segments, len(turn.spans)))
        kept = turn.answer[: turn.spans[heard - 1][1]] if heard else ""
        self._commit(turn, kept)
        if not turn.delivered:
            turn.events.put_nowait(turn.done_event(kept, interrupted=True))  # drained above: there is room
        logger.info(
            "agent session %s turn %d interrupted; kept %d characters", self.id, turn.number, len(kept)
        )
        return Interrupted(turn.number, kept)

    async def aclose(self) -> None:
        """Stop the turn and close the TTS session; idempotent."""
        await self.interrupt()
        if self._speaker is not None:
            speaker, self._speaker = self._speaker, None
            await speaker.aclose()

    # --- the turn's task ---------------------------------------------------------------------------------

    async def _run(self, turn: AgentTurn, messages: list[Message]) -> None:
        await turn.events.put(TurnStarted(turn.number, self.id, turn.source.label, turn.source.simulated))
        try:
            if self._speaker is None:
                self._speaker = await self._open_speaker()
            tts = await self._speaker.turn(turn.voice, turn.speed, turn.lang.code)
            if tts.reconnected is not None:
                await turn.events.put(
                    Reconnected(turn.number, f"the TTS connection was reopened: {tts.reconnected}")
                )
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(self._write(turn, messages, tts))
                    tg.create_task(self._speak(turn, tts))
            finally:
                await tts.aclose()
        except* KoeError as group:
            first = group.exceptions[0]
            assert isinstance(first, KoeError)  # except* KoeError holds only KoeErrors
            log_refusal(logger, f"agent session {self.id} turn {turn.number} failed", first)
            await turn.events.put(TurnError(turn.number, first.code, first.message))
        except* Exception as group:  # a bug: the client is told, the turn still ends with ``done``
            logger.error(
                "agent session %s turn %d failed", self.id, turn.number, exc_info=group.exceptions[0]
            )
            await turn.events.put(TurnError(turn.number, "internal_error", "the agent failed; see its log"))
        self._commit(turn, turn.answer)
        await turn.events.put(turn.done_event(turn.answer, interrupted=False))

    async def _write(self, turn: AgentTurn, messages: list[Message], tts: SpeakerTurn) -> None:
        """LLM deltas → the TTS turn and the client. If the LLM fails, what it wrote is still spoken.

        An LLM's answer goes through a :class:`SentenceGate`, so the TTS never gets a sentence cut off or
        said twice; read-aloud text (a simulated source) is passed on as it comes, so its first segment
        need not wait for its first sentence to end.
        """
        gate = None
        if not turn.source.simulated:
            gate = SentenceGate(self._options.max_answer_sentences, turn.lang.code)
        deltas = turn.source.stream(messages)
        within = True  # the answer is within max_answer_chars
        async with aclosing(deltas):  # closing it is what stops the LLM
            while within and not (gate is not None and gate.full):
                try:
                    delta = await anext(deltas)
                except StopAsyncIteration:
                    break
                except KoeError as exc:
                    await turn.events.put(TurnError(turn.number, exc.code, exc.message))
                    break
                if turn.first_token is None:
                    turn.first_token = time.monotonic()
                within = await self._pass_on(turn, tts, delta if gate is None else gate.feed(delta))
        if within and gate is not None:
            await self._pass_on(turn, tts, gate.finish())
        turn.text_done = time.monotonic()
        await tts.finish()

    async def _pass_on(self, turn: AgentTurn, tts: SpeakerTurn, text: str) -> bool:
        """Give ``text`` to the TTS turn and the client; False (and an error event) past the answer limit."""
        if len(text) > self._options.max_answer_chars - len(turn.answer):
            await turn.events.put(
                TurnError(
                    turn.number,
                    "answer_too_long",
                    f"the answer reached the limit of {self._options.max_answer_chars} characters; "
                    "the rest was not spoken",
                )
            )
            return False
        if text:
            turn.answer += text
            await tts.add(text)
            await turn.events.put(TextDelta(turn.number, text))
        return True

    async def _speak(self, turn: AgentTurn, tts: SpeakerTurn) -> None:
        """The TTS turn's segments → the client, in order, each announced before its first piece of audio
        and its pieces passed on as they come; a segment that fails is reported and skipped (the engine
        failed, or its text is in a script the turn's language cannot read)."""
        while True:
            try:
                spoken = await tts.next()
            except (SynthesisError, ConfigError) as exc:
                await turn.events.put(TurnError(turn.number, exc.code, exc.message))
                continue
            if spoken is None:
                return
            if spoken.first:
                turn.spans.append(spoken.source_span)
                whole = round(spoken.duration_s, 3) if spoken.last else None
                await turn.events.put(
                    SegmentReady(
                        turn.number, spoken.index, spoken.text, spoken.source_span, whole, spoken.words
                    )
                )
            if spoken.pcm:  # a remote segment's last piece is empty: its frames went on as they came
                if turn.first_audio is None:
                    turn.first_audio = time.monotonic()
                turn.audio_s += spoken.duration_s
                await turn.events.put(AudioReady(turn.number, spoken.index, spoken.sample_rate, spoken.pcm))

    def _commit(self, turn: AgentTurn, kept: str) -> None:
        """Put the turn's exchange in the history (replacing its earlier version); nothing if unheard.

        A user question whose answer was never heard is dropped with it: some providers (Bedrock) require
        user and assistant messages to alternate.
        """
        if turn.history_at is not None:
            del self.history[turn.history_at :]
        turn.history_at = len(self.history)
        if kept.strip():
            self.history += [Message("user", turn.prompt), Message("assistant", kept)]
        excess = len(self.history) - self._options.max_history_messages
        if excess > 0:
            excess += excess % 2  # whole exchanges, oldest first
            del self.history[:excess]
            turn.history_at = max(0, turn.history_at - excess)
