"""The agent speaks the voice's language: the LLM is asked to answer in it, the TTS turn reads in it, and
the page gets the voices grouped by language."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from koe.agent.base import SpeakerSession, SpeakerTurn
from koe.agent.events import AgentEvent, SegmentReady, TurnDone, TurnError
from koe.agent.pipeline import DEFAULT_SYSTEM_PROMPT, AgentSession, system_prompt, turn_language
from koe.agent.protocol import Ask, Read, parse_message
from koe.agent.routes import voice_groups
from koe.engine.voices import VOICES
from koe.errors import ConfigError
from koe.languages import language
from koe.pipeline.synthesizer import Synthesizer
from live_server import LiveServer
from sse_events import sse_events
from support.agent import RecordingSource, with_session


def test_the_default_prompt_asks_for_the_turn_s_language_by_its_own_name() -> None:
    assert "日本語" in system_prompt(DEFAULT_SYSTEM_PROMPT, language("ja"))
    assert "English" in system_prompt(DEFAULT_SYSTEM_PROMPT, language("en-gb"))
    assert "{language}" not in system_prompt(DEFAULT_SYSTEM_PROMPT, language("es"))


def test_a_custom_prompt_gets_a_language_line_only_for_other_languages() -> None:
    assert system_prompt("Be brief.", language("en-us")) == "Be brief."
    assert system_prompt("Be brief.", language("fr")).endswith("Always answer in French (français).")


def test_a_turn_speaks_lang_if_given_else_the_voice_s_language() -> None:
    assert turn_language("jf_alpha", None).code == "ja"
    assert turn_language("zf_xiaobei(2)+zm_yunxi", None).code == "zh"
    assert turn_language("jf_alpha", "en-gb").code == "en-gb"
    with pytest.raises(ConfigError):
        turn_language("af_heart", "tlh")


def test_ask_and_read_carry_a_validated_lang() -> None:
    ask = parse_message('{"type": "ask", "prompt": "Hola", "voice": "ef_dora", "lang": "ES"}', max_bytes=4096)
    assert isinstance(ask, Ask) and ask.lang == "es"
    read = parse_message('{"type": "read", "text": "Hi.", "lang": "pt"}', max_bytes=4096)
    assert isinstance(read, Read) and read.lang == "pt-br"
    with pytest.raises(ConfigError, match="lang must be one of"):
        parse_message('{"type": "ask", "prompt": "Hi", "lang": "xx"}', max_bytes=4096)


def test_the_llm_is_asked_in_the_voice_s_language_and_the_tts_reads_in_it() -> None:
    opened: list[tuple[str, float, str | None]] = []

    async def main(
        session: AgentSession, synthesizer: Synthesizer
    ) -> tuple[list[AgentEvent], RecordingSource]:
        real = session._open_speaker

        class Recording:
            def __init__(self, inner: SpeakerSession) -> None:
                self._inner = inner

            async def turn(self, voice: str, speed: float, lang: str | None = None) -> SpeakerTurn:
                opened.append((voice, speed, lang))
                return await self._inner.turn(voice, speed, lang)

            async def aclose(self) -> None:
                await self._inner.aclose()

        async def opener() -> SpeakerSession:
            return Recording(await real())

        session._open_speaker = opener
        source = RecordingSource("はい、わかりました。")
        turn = await session.start("こんにちは", source, voice="jf_alpha")
        return [event async for event in session.events(turn)], source

    events, source = with_session(main)
    assert isinstance(events[-1], TurnDone) and not any(isinstance(e, TurnError) for e in events)
    assert opened == [("jf_alpha", 1.0, "ja")]
    system = source.asked[0][0]
    assert system.role == "system" and "日本語" in system.content


def test_voices_are_grouped_by_language_in_koe_s_order() -> None:
    groups = voice_groups(list(VOICES))
    assert [g["lang"] for g in groups] == ["en-us", "en-gb", "es", "fr", "hi", "it", "ja", "pt-br", "zh"]
    japanese = next(g for g in groups if g["lang"] == "ja")
    assert japanese["language"] == "Japanese" and "jf_alpha" in japanese["voices"]
    assert sum(len(g["voices"]) for g in groups) == 54


def test_the_page_s_info_groups_the_voices(fake_server: LiveServer) -> None:
    info = httpx.get(fake_server.http_url + "/agent/info").json()
    assert {g["lang"] for g in info["voice_groups"]} >= {"ja", "zh", "es"}


def test_a_read_aloud_invocation_in_spanish_is_spoken(fake_server: LiveServer) -> None:
    body: dict[str, Any] = {"read": "Hola, ¿qué tal? Muy bien.", "tokens_per_s": 50, "first_token_delay_s": 0,
                            "voice": "ef_dora"}  # fmt: skip
    response = httpx.post(fake_server.http_url + "/agent/invocations", json=body, timeout=60)
    events = sse_events(response)
    assert [e["type"] for e in events].count("audio") >= 1 and events[-1]["type"] == "done"
    assert not [e for e in events if e["type"] == "error"]


#: Three segments: the second in hangul, which no Kokoro language reads.
KOREAN_IN_SPANISH = "Hola amigo. 안녕하세요 친구, 오늘은 날씨가 정말 좋네요. Adiós, hasta mañana, amigo."


def test_a_segment_in_a_script_the_language_cannot_read_is_reported_and_the_answer_goes_on() -> None:
    async def main(session: AgentSession, synthesizer: Synthesizer) -> list[AgentEvent]:
        source = RecordingSource(KOREAN_IN_SPANISH)
        turn = await session.start("Hola", source, voice="ef_dora")
        return [event async for event in session.events(turn)]

    events = with_session(main)
    errors = [e for e in events if isinstance(e, TurnError)]
    assert [e.code for e in errors] == ["unsupported_script"] and "Korean hangul" in errors[0].message
    spoken = [e.text for e in events if isinstance(e, SegmentReady)]
    assert spoken[0] == "Hola amigo." and spoken[-1].startswith("Adiós")
    assert isinstance(events[-1], TurnDone)
