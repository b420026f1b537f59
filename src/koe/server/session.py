"""One WebSocket session: a reader and a writer task in a TaskGroup, and the session's turns.

The reader acts on every message at once — ``cancel`` never waits behind queued text or audio — and the
writer is the only task that sends. Turns run as tasks of the same group; their output goes through the
session's :class:`~koe.server.outbox.Outbox`, which holds audio within its water marks.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, KoeError, LimitError, OverloadedError
from koe.logs import ContextLogger, log_refusal
from koe.pipeline.listener import Listener
from koe.pipeline.synthesizer import Synthesizer
from koe.server.dialects import SPECS
from koe.server.outbox import CloseRequest, Outbox
from koe.server.protocol import parse_message, parse_query
from koe.server.runtime import Runtime
from koe.server.turn import Turn
from koe.types import SAMPLE_RATE
from koe.wire.errors import route_of
from koe.wire.messages import (
    Append,
    Cancel,
    Close,
    Configure,
    Dialect,
    Error,
    Flush,
    Request,
    SessionOptions,
    TurnOptions,
    encode,
)

logger = logging.getLogger(__name__)

#: How long the writer gets to deliver a closing error before the session ends regardless.
CLOSE_GRACE_S = 5.0
#: Replies and messages waiting for a client that does not read them: past this the session is closed
#: (``replies_unread``), or a client flooding bad messages would grow the server without bound.
MAX_UNSENT_MESSAGES = 256
#: Data items that belong to no turn (the final close after a ``close`` message).
_NO_TURN = -1
#: What sending on a socket that is gone raises: Starlette's disconnect errors, and uvicorn's RuntimeError
#: when it closed the socket by itself first (its keepalive ping timed out on a client that stopped reading,
#: or a frame was over ``ws_max_size``); for a session all of them mean the client is gone.
SOCKET_GONE = (WebSocketDisconnect, WebSocketDisconnected, RuntimeError)


class _SessionOver(Exception):
    """Raised by whichever of reader and writer finishes first, so the TaskGroup cancels the other."""


class Session:
    """Serves one accepted WebSocket until it closes; ``query`` is the connect URL's query."""

    def __init__(
        self, websocket: WebSocket, runtime: Runtime, synthesizer: Synthesizer, query: Mapping[str, str]
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self._log = ContextLogger(logger, {"session": self.id})
        self._ws = websocket
        self._runtime = runtime
        self._settings = runtime.settings
        self._synthesizer = synthesizer
        self._options = TurnOptions(self._settings.default_voice, 1.0, SAMPLE_RATE, AudioFormat.PCM)
        self._query = query
        self._listener = Listener()
        self._seat = runtime.capacity.seat()
        self._outbox = Outbox(self._settings.audio_high_water_s, self._settings.audio_low_water_s)
        self._turns: list[Turn] = []
        self._open: Turn | None = None
        self._next_turn = 0
        self._chars = 0
        self._closing = False
        self._tg: asyncio.TaskGroup | None = None
        self._active_at = 0.0  # loop time of the last message received, frame sent, or synthesis waited on

    async def run(self) -> None:
        """Serve until the client leaves, the session closes, or its time is up. Cancelling is safe."""
        self._log.info("session opened")
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(
            self._settings.max_session_s,
            self._report,
            LimitError(
                f"the session reached its limit of {self._settings.max_session_s:g} s", code="session_expired"
            ),
        )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                try:
                    self._configure(parse_query(self._query), reply=False)
                except KoeError as exc:  # the session opens with the defaults; the client is told why
                    self._report(exc)
                tg.create_task(self._reader())
                tg.create_task(self._writer())
        except* _SessionOver:
            pass
        finally:
            expiry.cancel()
            self._log.info("session closed", extra={"turns": self._next_turn})

    # --- reader ------------------------------------------------------------------------------------------

    async def _reader(self) -> None:
        if await self._read():
            raise _SessionOver  # the client left: stop everything
        # else a fatal error is being delivered by the writer, within CLOSE_GRACE_S

    async def _end_soon(self) -> None:
        await asyncio.sleep(CLOSE_GRACE_S)
        self._log.info("the client did not take its closing error in %.0f s", CLOSE_GRACE_S)
        raise _SessionOver

    async def _read(self) -> bool:
        """Handle messages until the client leaves (``True``) or a fatal error ends the session."""
        loop = asyncio.get_running_loop()
        idle_s = self._settings.idle_timeout_s
        self._active_at = loop.time()
        while True:
            try:
                async with asyncio.timeout_at(self._active_at + idle_s):
                    message = await self._ws.receive()
            except TimeoutError:
                if self._active_at + idle_s > loop.time():
                    continue  # something was sent meanwhile
                if self._waiting_on_synthesis():
                    self._active_at = loop.time()  # the listener waits for audio: not idle
                    continue
                self._report(LimitError(f"no message for {idle_s:g} s", code="idle_timeout"))
                return False
            self._active_at = loop.time()
            if message["type"] == "websocket.disconnect":
                return True
            if self._closing:
                continue  # after close: wait for the writer, ignore further messages
            data = message.get("text") if message.get("text") is not None else message.get("bytes")
            try:
                self._handle(
                    parse_message(
                        data or b"",
                        max_bytes=self._settings.max_message_bytes,
                        max_chars=self._settings.max_message_chars,
                    )
                )
            except KoeError as exc:
                if self._report(exc):
                    return False
            if self._outbox.unsent_messages:
                # messages a burst brought are all queued already: let the writer hand the replies to the
                # socket before counting them as unread
                await asyncio.sleep(0)
            if self._outbox.unsent_messages > MAX_UNSENT_MESSAGES:
                self._report(
                    LimitError(
                        f"{self._outbox.unsent_messages} replies are waiting to be sent: the client sends "
                        "but does not read",
                        code="replies_unread",
                    )
                )
                return False

    def _waiting_on_synthesis(self) -> bool:
        """A turn's audio is on its way and the client is taking it: a quiet client is listening, not
        idle. A turn waiting for more text, or audio the client does not read, is no reason to stay."""
        return not self._outbox.paused and any(turn.speaker.stream.working for turn in self._turns)

    def _handle(self, message: Any) -> None:
        match message:
            case Append(text=text, dialect=dialect):
                if text:
                    turn = self._open or self._start_turn(dialect)
                    self._count(text)
                    turn.add(text)
            case Flush(dialect=dialect, last=last):
                (self._open or self._start_turn(dialect)).finish(dialect, last=last)
                self._open = None
                ack = SPECS[dialect].flush_ack
                if ack is not None:  # acknowledged ahead of queued audio, as NIM does
                    self._outbox.control(encode(ack))
            case Cancel(dialect=dialect):
                self._cancel(dialect)
            case Configure(options=options, dialect=dialect):
                self._configure(options, reply=True, dialect=dialect)
            case Request(text=text, options=options, request_id=request_id):
                if not text.strip():
                    raise ConfigError("text must not be empty", code="invalid_field")
                if self._open is not None:  # a request ends the open turn as a flush would
                    self._open.finish(self._open.opened_by)
                    self._open = None
                turn = self._start_turn(
                    Dialect.AWS, options, uuid.uuid4().hex if request_id is None else request_id
                )
                self._count(text)
                turn.add(text)
                turn.finish(Dialect.AWS)
            case Close(dialect=dialect):
                self._close(dialect)

    def _count(self, text: str) -> None:
        turn_chars = (self._open.chars if self._open else 0) + len(text)
        if turn_chars > self._settings.max_turn_chars:
            raise LimitError(
                f"the turn's text would be {turn_chars} characters, over the limit of "
                f"{self._settings.max_turn_chars}",
                code="turn_too_long",
            )
        if self._chars + len(text) > self._settings.max_session_chars:
            raise LimitError(
                f"the session's text would be over its limit of {self._settings.max_session_chars} "
                "characters",
                code="session_too_long",
            )
        self._chars += len(text)

    def _configure(self, options: SessionOptions, *, reply: bool, dialect: Dialect = Dialect.KOE) -> None:
        """Apply ``options`` to turns opened from now on (all or nothing: a bad voice changes nothing)."""
        try:
            merged = options.over(self._options)
            voice = self._synthesizer.voice(merged.voice, merged.speed, merged.lang, merged.lexicon)
        except KoeError as exc:
            self._report(exc)
            return
        self._options = merged
        if reply:
            self._outbox.control(encode(SPECS[dialect].config_reply(self.id, voice, merged)))

    def _start_turn(
        self, dialect: Dialect, overrides: SessionOptions | None = None, request_id: str | int | None = None
    ) -> Turn:
        assert self._tg is not None  # turns start only while the session runs
        limit = self._settings.max_pending_turns
        if len(self._turns) >= limit:
            raise LimitError(
                f"{limit} turns of this session are waiting to be spoken, the limit: wait for one to end or "
                "cancel them",
                code="too_many_turns",
            )
        options = (overrides or SessionOptions()).over(self._options)
        if SPECS[dialect].pcm_only:  # their contracts: PCM16 whatever the session's format
            options = SessionOptions(format=AudioFormat.PCM).over(options)
        synthesizer = self._synthesizer
        voice = synthesizer.voice(options.voice, options.speed, options.lang, options.lexicon)
        speaker = synthesizer.speaker(synthesizer.stream(voice, self._listener), "ws")
        turn = Turn(
            self._next_turn,
            dialect,
            options,
            speaker,
            outbox=self._outbox,
            frame_s=self._settings.frame_s,
            report=self._report,
            seat=self._seat,
            request_id=request_id,
        )
        self._next_turn += 1
        previous = self._turns[-1].task if self._turns else None
        turn.task = self._tg.create_task(
            self._speak(turn, previous), name=f"koe-turn-{self.id}-{turn.number}"
        )
        self._turns.append(turn)
        if SPECS[dialect].opens_turns:
            self._open = turn
        return turn

    async def _speak(self, turn: Turn, previous: asyncio.Task[None] | None) -> None:
        try:
            await turn.run(previous)
            if turn.speaker.tally.outcome == "flushed":
                self._runtime.metrics.turns.labels("flushed").inc()
        finally:
            if turn in self._turns:
                self._turns.remove(turn)
            self._log.info(  # the turn's one summary line: counts and times, never its text
                "turn ended", extra={"turn": turn.number, "chars": turn.chars, **turn.tally_fields}
            )

    def _cancel(self, dialect: Dialect) -> None:
        """Barge-in: every unfinished turn stops now; nothing of theirs is sent after the reply."""
        cancelled = {turn.number for turn in self._turns}
        for turn in self._turns:
            assert turn.task is not None  # set when the turn started
            turn.cancelled()
            turn.task.cancel()
        self._outbox.drop_turns(cancelled)
        self._runtime.metrics.cancels.inc()
        self._runtime.metrics.turns.labels("cancelled").inc(len(cancelled))
        if cancelled:
            number = max(cancelled)
        else:  # nothing to cancel: the reply still ends a turn number, as a flush would
            number, self._next_turn = self._next_turn, self._next_turn + 1
        self._turns.clear()
        self._open = None
        self._outbox.control(encode(SPECS[dialect].cancelled(number)))

    def _close(self, dialect: Dialect) -> None:
        """Speak what is pending, then close normally."""
        if self._open is not None:
            self._open.finish(dialect)
            self._open = None
        self._closing = True
        assert self._tg is not None  # close arrives only while the session runs
        self._tg.create_task(self._close_after([t.task for t in self._turns if t.task is not None]))

    async def _close_after(self, tasks: list[asyncio.Task[None]]) -> None:
        if tasks:
            await asyncio.wait(tasks)
        self._outbox.data(_NO_TURN, CloseRequest(1000))

    def _report(self, error: KoeError) -> bool:
        """Tell the client; if the error ends the session, queue the close. Returns whether it does."""
        route = route_of(error)
        self._runtime.metrics.errors.labels(error.code).inc()
        retry = error.retry_after_s if isinstance(error, OverloadedError) else None
        self._outbox.control(encode(Error(error.code, error.message, retry)))
        log_refusal(self._log, "error sent", error)
        if route.ws_close is None:
            return False
        if not self._closing and self._tg is not None:
            self._tg.create_task(self._end_soon())  # a client that does not read must not hold us
        self._closing = True
        self._outbox.control(CloseRequest(route.ws_close, error.code))
        return True

    # --- writer ------------------------------------------------------------------------------------------

    async def _writer(self) -> None:
        try:
            while True:
                payload = await self._outbox.get()
                if isinstance(payload, CloseRequest):
                    await self._ws.close(payload.code, payload.reason)
                    break
                if isinstance(payload, str):
                    await self._ws.send_text(payload)
                else:
                    await self._ws.send_bytes(payload)
                self._active_at = asyncio.get_running_loop().time()
        except SOCKET_GONE as exc:
            self._log.info("the client left while we were sending (%s)", type(exc).__name__)
        raise _SessionOver
