"""The voice agent as a service: its LLM (built on first use), its TTS, and its named sessions.

Browser WebSocket sessions are owned by their socket. HTTP invocations name a session (AgentCore's
session id) so a conversation spans requests: those sessions live in a bounded, least-recently-used store,
and the one evicted is closed (its turn stopped, its TTS connection released).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from koe.agent.base import LLMSource, Speaker, SpeakerSession
from koe.agent.config import LLMConfig
from koe.agent.pipeline import AgentOptions, AgentSession

logger = logging.getLogger(__name__)

#: Named conversations kept at once; the least recently used beyond this is closed.
MAX_NAMED_SESSIONS = 256


class VoiceAgent:
    """Everything the agent routes share.

    Args:
        speaker: the TTS (in this process, or remote).
        llm: the LLM configuration; the source is built on the first question.
        options: limits and defaults of every session.
        max_named_sessions: bound of the HTTP session store.
    """

    def __init__(
        self,
        speaker: Speaker,
        llm: LLMConfig,
        options: AgentOptions | None = None,
        max_named_sessions: int = MAX_NAMED_SESSIONS,
    ) -> None:
        self.speaker = speaker
        self.llm_config = llm
        self.options = options or AgentOptions()
        self._llm: LLMSource | None = None
        self._llm_lock = asyncio.Lock()
        self._named: OrderedDict[str, AgentSession] = OrderedDict()
        self._max_named = max_named_sessions

    async def llm(self) -> LLMSource:
        """The configured LLM source, built once (off the event loop: the local model loads for a second).

        Raises:
            ConfigError: no LLM configured (``no_llm``, saying how to enable one) or its extra missing.
        """
        async with self._llm_lock:
            if self._llm is None:
                self._llm = await asyncio.to_thread(self.llm_config.build)
                logger.info("agent LLM: %s", self._llm.label)
            return self._llm

    def open_session(self, session_id: str | None = None) -> AgentSession:
        """A session owned by the caller, who closes it (a browser's socket)."""
        return AgentSession(self.options, self._open_speaker, session_id)

    async def named_session(self, session_id: str) -> AgentSession:
        """The session called ``session_id``, created if new; may close the least recently used one."""
        session = self._named.get(session_id)
        if session is None:
            session = self._named[session_id] = self.open_session(session_id)
            if len(self._named) > self._max_named:
                _, evicted = self._named.popitem(last=False)
                await evicted.aclose()
        self._named.move_to_end(session_id)
        return session

    async def aclose(self) -> None:
        """Close every named session, then the LLM source; idempotent."""
        while self._named:
            _, session = self._named.popitem()
            await session.aclose()
        if self._llm is not None:
            llm, self._llm = self._llm, None
            await llm.aclose()

    async def _open_speaker(self) -> SpeakerSession:
        return await self.speaker.session()
