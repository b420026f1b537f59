"""One Wyoming connection: a reader and a writer task in a TaskGroup, and the connection's answers.

As in a WebSocket session (:mod:`koe.server.session`), the reader parses events as bytes arrive
(:mod:`koe.wire.wyoming`) and acts on them at once, and the writer is the only task that writes, through the
session's :class:`~koe.server.outbox.Outbox` (its water marks pause synthesis for a client that does not
read). A request — a whole ``synthesize``, or ``synthesize-start`` … ``-stop`` with its text streamed in
chunks — is one turn of the pipeline: its text goes through the turn language's incremental segmenter, so a
streamed answer's first audio follows its first clause. Requests are answered in order. A client that leaves
(end of stream) cancels its answers, and with them their queued segments; words are timed as for every
transport but never sent (Wyoming has no place for them).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import nullcontext, suppress
from dataclasses import dataclass

from koe import __version__
from koe.audio.formats import AudioFormat
from koe.audio.pcm import to_pcm16
from koe.errors import KoeError, LimitError, OverloadedError, ProtocolError, VoiceError
from koe.logs import ContextLogger, log_refusal
from koe.pipeline.listener import Listener
from koe.pipeline.speaker import SegmentAudio, SegmentFailed, Speaker
from koe.pipeline.synthesizer import Synthesizer
from koe.pipeline.voice import Voice
from koe.server.outbox import CloseRequest, Outbox
from koe.server.runtime import Runtime
from koe.server.session import CLOSE_GRACE_S, MAX_UNSENT_MESSAGES
from koe.server.stdio import drop
from koe.server.turn import split_frames
from koe.text.ssml import is_ssml
from koe.types import SAMPLE_RATE
from koe.wire.errors import WS_NORMAL, route_of
from koe.wire.wyoming import (
    SAMPLE_WIDTH,
    Attribution,
    AudioChunk,
    AudioStart,
    AudioStop,
    ClientEvent,
    Describe,
    Error,
    EventDecoder,
    Info,
    InfoVoice,
    Ping,
    Pong,
    ServerEvent,
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    VoiceChoice,
    encode,
    language_tag,
    parse_event,
    wyoming_language,
)

logger = logging.getLogger(__name__)

#: The label of this transport's sessions and time to first audio in the metrics.
TRANSPORT = "wyoming"
#: Bytes taken from the socket at a time (the decoder bounds what one event may hold).
READ_BYTES = 64 * 1024
#: Who made the voices, as ``info`` credits them.
KOKORO = Attribution("hexgrad (Kokoro-82M)", "https://huggingface.co/hexgrad/Kokoro-82M")
#: TCP has no close code: the outbox's close request only marks where the writer stops.
_CLOSE = CloseRequest(WS_NORMAL)
#: Outbox data that belongs to no answer (the close once the answers are sent).
_NO_ANSWER = -1


class _SessionOver(Exception):
    """Raised by whichever of reader and writer finishes first, so the TaskGroup cancels the other."""


@dataclass(eq=False, slots=True)
class _Answer:
    """One request's answer: its speaker (``None``: the request was refused, its voice could not be had,
    and is answered without audio), whether it was streamed (it then ends with ``synthesize-stopped``),
    and the task that speaks it. Dropped whole when the client leaves."""

    number: int
    speaker: Speaker | None
    streamed: bool
    chars: int = 0
    task: asyncio.Task[None] | None = None
    #: declared SSML (``text_format``) whose start is not yet known to be a ``<speak>`` root: held until it
    #: is; None once known (or for plain text)
    unrooted: str | None = None
    #: what ends the text: the ``</speak>`` of the root given to a fragment
    closing: str = ""

    @property
    def working(self) -> bool:
        """Its audio is on its way (:attr:`koe.pipeline.stream.SegmentStream.working`)."""
        return self.speaker is not None and self.speaker.stream.working

    def add(self, text: str) -> None:
        self.chars += len(text)
        if self.speaker is None:
            return
        if self.unrooted is not None:
            self.unrooted += text
            if is_ssml(self.unrooted) is None:
                return  # "<spe" may yet be a root
            self._root()
            return
        self.speaker.stream.add(text)

    def finish(self) -> None:
        """Its text is complete."""
        if self.speaker is not None:
            if self.unrooted is not None:
                self._root()
            self.speaker.stream.add(self.closing)
            self.speaker.stream.finish()

    def _root(self) -> None:
        """Pass on the held SSML, with a ``<speak>`` root if it has none (an SSML fragment)."""
        assert self.speaker is not None and self.unrooted is not None
        held, self.unrooted = self.unrooted, None
        if not is_ssml(held):
            held, self.closing = f"<speak>{held}", "</speak>"
        self.speaker.stream.add(held)


def language_voice(lang: str, default: str, synthesizer: Synthesizer) -> str:
    """The voice a request naming only ``lang`` hears: the server's ``default`` voice if it speaks that
    language, else the first installed voice of it by name.

    Raises:
        VoiceError: no installed voice speaks ``lang``.
    """
    voices = synthesizer.speech.voices
    with suppress(KoeError):  # a default koe cannot read the language of picks by name below
        if voices.lang_of(default) == lang:
            return default
    for info in voices.info():
        if info.lang == lang:
            return info.name
    raise VoiceError(f"no voice of {lang} is installed on this server; voices: {', '.join(voices.names())}")


def info_of(synthesizer: Synthesizer) -> Info:
    """``info``: every installed voice with its language, streaming, koe's version."""
    voices = [
        InfoVoice(v.name, (language_tag(v.lang),), f"{v.name} ({v.language}, {v.gender})")
        for v in synthesizer.speech.voices.info()
    ]
    return Info("koe", "Kokoro-82M speaking from the first clause (koe)", __version__, KOKORO, voices)


class WyomingSession:
    """Serves one accepted connection until it closes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        runtime: Runtime,
        synthesizer: Synthesizer,
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self._log = ContextLogger(logger, {"session": self.id})
        self._reader = reader
        self._writer = writer
        self._runtime = runtime
        self._settings = runtime.settings
        self._synthesizer = synthesizer
        self._decoder = EventDecoder()
        self._listener = Listener()
        self._seat = runtime.capacity.seat()  # checked at its first answer with audio
        self._outbox = Outbox(self._settings.audio_high_water_s, self._settings.audio_low_water_s)
        self._answers: list[_Answer] = []
        self._open: _Answer | None = None  # a streamed request between its start and its stop
        self._next = 0
        self._chars = 0
        self._closing = False
        self._draining = False  # the server stops: close once the answers under way are sent
        self._tg: asyncio.TaskGroup | None = None
        self._active_at = 0.0  # loop time of the last byte received, event sent, or synthesis waited on
        self._event_since: float | None = None  # when the unfinished event's first byte came
        self._body_since: float | None = None  # when its header line was complete

    def drain(self) -> None:
        """The server stops: end the session once its answers under way are sent (at once if there are
        none); a streamed request goes on taking its chunks until then."""
        self._draining = True
        if not self._answers:
            self._close()

    def abort(self) -> None:
        """End the session now: the connection is dropped, and with it the answers' work."""
        drop(self._writer.transport)

    def _close(self, *, now: bool = False) -> None:
        """Close after everything queued (``now``: before the queued answers, after what the error says)."""
        if self._closing and not now:
            return
        self._closing = True
        if now:
            self._outbox.control(_CLOSE)
        else:
            self._outbox.data(_NO_ANSWER, _CLOSE)

    async def run(self) -> None:
        """Serve until the client leaves, an error ends the session, or its time is up. Cancelling is
        safe: the answers' jobs leave the scheduler."""
        self._log.info("wyoming session opened")
        limit_s = self._settings.max_session_s
        expiry = asyncio.get_running_loop().call_later(
            limit_s,
            self._report,
            LimitError(f"the session reached its limit of {limit_s:g} s", code="session_expired"),
        )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self._read_events())
                tg.create_task(self._write_events())
        except* _SessionOver:
            pass
        finally:
            expiry.cancel()
            self._writer.close()
            self._log.info("wyoming session closed", extra={"turns": self._next})

    # --- reader ------------------------------------------------------------------------------------------

    async def _read_events(self) -> None:
        if await self._read():
            raise _SessionOver  # the client left: stop everything
        # else a fatal error is being delivered by the writer, within CLOSE_GRACE_S

    async def _read(self) -> bool:
        """Handle events until the client leaves (``True``) or an error ends the session."""
        loop = asyncio.get_running_loop()
        self._active_at = loop.time()
        while True:
            deadline, expired = self._deadline()
            try:
                async with asyncio.timeout_at(deadline):
                    data = await self._reader.read(READ_BYTES)
            except TimeoutError:
                if self._deadline()[0] > loop.time():
                    continue  # something was sent meanwhile
                if expired is None and self._waiting_on_synthesis():
                    self._active_at = loop.time()  # the listener waits for audio: not idle
                    continue
                self._report(expired or self._idle())
                return False
            except ConnectionError:
                return True
            if not data:
                return True
            self._active_at = loop.time()
            if not self._take(data):
                return False
            if self._outbox.unsent_messages:
                await asyncio.sleep(0)  # let the writer hand this burst's replies to the socket first
            if self._outbox.unsent_messages > MAX_UNSENT_MESSAGES:
                unread = self._outbox.unsent_messages
                self._report(
                    LimitError(
                        f"{unread} events are waiting to be sent: the client sends but does not read",
                        code="replies_unread",
                    )
                )
                return False

    def _deadline(self) -> tuple[float, LimitError | None]:
        """When the reader stops waiting, and the error it reports then (``None``: the idle check)."""
        settings = self._settings
        if self._body_since is not None:
            return self._body_since + settings.body_timeout_s, LimitError(
                f"an event's data and payload did not arrive within {settings.body_timeout_s:g} s of its "
                "header line",
                code="event_timeout",
            )
        if self._event_since is not None:
            return self._event_since + settings.header_timeout_s, LimitError(
                f"an event's header line did not arrive within {settings.header_timeout_s:g} s of its "
                "first byte",
                code="event_timeout",
            )
        return self._active_at + settings.idle_timeout_s, None

    def _idle(self) -> LimitError:
        return LimitError(f"no event for {self._settings.idle_timeout_s:g} s", code="idle_timeout")

    def _waiting_on_synthesis(self) -> bool:
        """An answer's audio is on its way and the client takes it: a quiet client is listening."""
        return not self._outbox.paused and any(answer.working for answer in self._answers)

    def _take(self, data: bytes) -> bool:
        """Handle every event ``data`` completes; whether the session goes on."""
        self._decoder.feed(data)
        completed = False  # an event ended here: what is left of the bytes began now
        while not self._closing:
            try:
                raw = self._decoder.next()
                if raw is None:
                    break
                completed = True
                self._handle(parse_event(raw, max_chars=self._settings.max_turn_chars))
            except KoeError as exc:
                completed = True
                if self._report(exc, fatal=self._decoder.lost):
                    return False
        now = asyncio.get_running_loop().time()
        self._event_since = self._since(self._event_since, self._decoder.partial, completed, now)
        self._body_since = self._since(self._body_since, self._decoder.in_body, completed, now)
        return not self._closing

    @staticmethod
    def _since(since: float | None, waiting: bool, completed: bool, now: float) -> float | None:
        """When the wait for the rest of an event (or of its body) began: ``None`` once nothing is awaited."""
        if not waiting:
            return None
        return now if since is None or completed else since

    def _handle(self, event: ClientEvent) -> None:
        match event:
            case Describe():
                self._outbox.control(encode(info_of(self._synthesizer)))
            case Ping(text=text):
                self._outbox.control(encode(Pong(text)))  # a liveness check: never behind audio
            case Synthesize(text=text, voice=voice, ssml=ssml):
                if self._open is not None:
                    return  # a streamed request's copy of its text, for servers that do not stream
                answer = self._start(voice, streamed=False, ssml=ssml)
                self._add(answer, text)
                answer.finish()
            case SynthesizeStart(voice=voice, ssml=ssml):
                if self._open is not None:
                    raise ProtocolError("expected synthesize-stop before another synthesize-start")
                self._open = self._start(voice, streamed=True, ssml=ssml)
            case SynthesizeChunk(text=text):
                self._add(self._streamed("synthesize-chunk"), text)
            case SynthesizeStop():
                self._streamed("synthesize-stop").finish()
                self._open = None

    def _streamed(self, kind: str) -> _Answer:
        if self._open is None:
            raise ProtocolError(f"expected {kind} between synthesize-start and synthesize-stop")
        return self._open

    def _add(self, answer: _Answer, text: str) -> None:
        """More text of ``answer``, within the turn's and the session's limits."""
        settings = self._settings
        if answer.chars + len(text) > settings.max_turn_chars:
            raise LimitError(
                f"the request's text would be {answer.chars + len(text)} characters, over the limit of "
                f"{settings.max_turn_chars}",
                code="turn_too_long",
            )
        if self._chars + len(text) > settings.max_session_chars:
            raise LimitError(
                f"the session's text would be over its limit of {settings.max_session_chars} characters",
                code="session_too_long",
            )
        self._chars += len(text)
        answer.add(text)

    def _voice(self, choice: VoiceChoice | None) -> Voice:
        """Raises ``VoiceError``/``ConfigError`` for a voice or language koe cannot speak, ``AssetError``
        for a language whose G2P is not installed."""
        default = self._settings.default_voice
        if choice is not None and choice.name is not None:
            return self._synthesizer.voice(choice.name)
        if choice is not None and choice.language is not None:
            lang = wyoming_language(choice.language).code
            return self._synthesizer.voice(language_voice(lang, default, self._synthesizer))
        return self._synthesizer.voice(default)

    def _start(self, choice: VoiceChoice | None, *, streamed: bool, ssml: bool) -> _Answer:
        """A new request's answer, spoken after the others; ``ssml``: its text is SSML (a fragment gets a
        ``<speak>`` root). A request whose voice koe cannot give gets its
        error now and is still answered in its turn, without audio, so that a client waiting for its end
        (Home Assistant waits for ``audio-stop`` or ``synthesize-stopped``) is not left waiting.

        Raises:
            LimitError: ``max_pending_turns`` requests are waiting (``too_many_turns``): not answered.
        """
        assert self._tg is not None  # requests come only while the session runs
        limit = self._settings.max_pending_turns
        if len(self._answers) >= limit:
            raise LimitError(
                f"{limit} requests of this connection are waiting to be answered, the limit",
                code="too_many_turns",
            )
        synthesizer = self._synthesizer
        speaker: Speaker | None = None
        try:
            speaker = synthesizer.speaker(synthesizer.stream(self._voice(choice), self._listener), TRANSPORT)
        except KoeError as exc:
            self._report(exc)
        answer = _Answer(self._next, speaker, streamed, unrooted="" if ssml else None)
        self._next += 1
        previous = self._answers[-1].task if self._answers else None
        answer.task = self._tg.create_task(
            self._answer(answer, previous), name=f"koe-wyoming-{self.id}-{answer.number}"
        )
        self._answers.append(answer)
        return answer

    # --- answers ---------------------------------------------------------------------------------------

    async def _answer(self, answer: _Answer, previous: asyncio.Task[None] | None) -> None:
        """Speak ``answer`` once ``previous`` has spoken. Cancelling drops its jobs and unsent audio."""
        started = time.monotonic()
        try:
            if previous is not None:
                await asyncio.wait([previous])
            await self._speak(answer)
        except OverloadedError as exc:
            if answer.speaker is not None:
                answer.speaker.tally.outcome = "refused"
            self._report(exc)
        finally:
            speaker = answer.speaker
            if speaker is not None:
                speaker.stream.close()
            self._answers.remove(answer)
            if self._draining and not self._answers:
                self._close()
            tally = (
                speaker.tally.fields(speaker.started_at) if speaker is not None else {"outcome": "refused"}
            )
            self._log.info(  # the answer's one summary line: counts and times, never its text
                "turn ended",
                extra={
                    "turn": answer.number,
                    "chars": answer.chars,
                    "elapsed_s": round(time.monotonic() - started, 3),
                    **tally,
                },
            )

    async def _speak(self, answer: _Answer) -> None:
        """``audio-start``, the audio as it is made, ``audio-stop`` (and ``synthesize-stopped`` for a
        streamed request); a failed segment is reported and skipped."""
        rate = SAMPLE_RATE
        speaker = answer.speaker
        # counted while its audio is made; a refusal (``over_capacity``) comes before ``audio-start``
        with self._seat.speaking() if speaker is not None else nullcontext():
            self._send(answer, AudioStart(rate))
            if speaker is not None:
                await self._audio(answer.number, speaker, rate)
        self._send(answer, AudioStop())
        if answer.streamed:
            self._send(answer, SynthesizeStopped())

    async def _audio(self, number: int, speaker: Speaker, rate: int) -> None:
        seconds_per_byte = 1 / (SAMPLE_WIDTH * rate)
        async for event in speaker.events():
            match event:
                case SegmentAudio(audio=audio):
                    for frame in split_frames(to_pcm16(audio), AudioFormat.PCM, rate, self._settings.frame_s):
                        self._outbox.data(
                            number, encode(AudioChunk(rate, frame)), len(frame) * seconds_per_byte
                        )
                    await self._outbox.room()
                case SegmentFailed(error=error):
                    self._report(error)
        speaker.tally.outcome = "flushed"
        self._runtime.metrics.turns.labels("flushed").inc()

    def _send(self, answer: _Answer, event: ServerEvent) -> None:
        self._outbox.data(answer.number, encode(event))

    def _report(self, error: KoeError, *, fatal: bool = False) -> bool:
        """Send ``error`` as an ``error`` event; close after it when it ends the session (as it would a
        WebSocket session: :func:`~koe.wire.errors.route_of`) or is ``fatal``. Returns whether it does."""
        self._runtime.metrics.errors.labels(error.code).inc()
        self._outbox.control(encode(Error(error.code, error.message)))
        log_refusal(self._log, "error sent", error)
        if route_of(error).ws_close is None and not fatal:
            return False
        if not self._closing and self._tg is not None:
            self._tg.create_task(self._end_soon())  # a client that does not read must not hold us
        self._close(now=True)
        return True

    async def _end_soon(self) -> None:
        await asyncio.sleep(CLOSE_GRACE_S)
        self._log.info("the client did not take its closing error in %.0f s", CLOSE_GRACE_S)
        raise _SessionOver

    # --- writer ------------------------------------------------------------------------------------------

    async def _write_events(self) -> None:
        """Write what the outbox gives; a client that reads nothing for ``send_timeout_s`` is cut off."""
        timeout_s = self._settings.send_timeout_s
        try:
            while True:
                payload = await self._outbox.get()
                if isinstance(payload, CloseRequest):
                    break
                self._writer.write(payload.encode() if isinstance(payload, str) else payload)
                async with asyncio.timeout(timeout_s):
                    await self._writer.drain()
                self._active_at = asyncio.get_running_loop().time()
        except TimeoutError:
            self._log.info("the client read nothing for %.0f s: the connection is cut", timeout_s)
            self.abort()
        except ConnectionError as exc:
            self._log.info("the client left while we were sending (%s)", type(exc).__name__)
        raise _SessionOver
