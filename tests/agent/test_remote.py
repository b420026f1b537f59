"""``koe agent``: the agent alone on AgentCore's paths, speaking through a remote koe TTS server.

Both are real uvicorn servers on loopback ports: the shared TTS server and an agent app whose speaker
is the WebSocket client of koe's streaming protocol.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.agent.config import LLMConfig
from koe.agent.remote import RemoteSpeaker, remote_voices
from koe.agent.routes import create_agent_app
from koe.agent.service import VoiceAgent
from koe.settings import Settings
from live_server import LOOPBACK, LiveServer, loopback_socket, run_server
from sse_events import THREE_SENTENCES, segment_words, sse_events
from ws_events import messages, receive, run, send, until


@pytest.fixture(scope="module")
def agent_server(fake_server: LiveServer) -> Iterator[LiveServer]:
    speaker = RemoteSpeaker(fake_server.http_url, remote_voices(fake_server.http_url))
    settings = Settings(host=LOOPBACK, port=0)
    with run_server(create_agent_app(VoiceAgent(speaker, LLMConfig("none"))), settings) as live:
        yield live


def test_the_remote_servers_voices_are_offered(agent_server: LiveServer) -> None:
    info = httpx.get(agent_server.http_url + "/agent/info").json()
    assert "af_heart" in info["voices"] and len(info["voices"]) > 20
    assert info["llm_available"] is False and "koe[local-llm]" in info["how_to_enable"]


def test_agentcore_paths_answer_at_the_root(agent_server: LiveServer) -> None:
    assert httpx.get(agent_server.http_url + "/ping").json() == {"status": "Healthy"}
    with httpx.Client(timeout=120) as client:
        response = client.post(
            agent_server.http_url + "/invocations",
            json={"read": "Hello from the other container.", "tokens_per_s": 40},
            headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": "session-one"},
        )
    events = sse_events(response)
    assert events[0]["type"] == "turn" and events[0]["session_id"] == "session-one"
    assert events[-1]["type"] == "done" and events[-1]["audio_s"] > 0.5
    assert {e["type"] for e in events} >= {"text_delta", "segment", "audio"}
    segments = [e for e in events if e["type"] == "segment"]
    assert segment_words("Hello from the other container.", segments) == [
        "Hello", "from", "the", "other", "container",
    ]  # fmt: skip


def test_asking_without_an_llm_says_how_to_enable_one(agent_server: LiveServer) -> None:
    response = httpx.post(agent_server.http_url + "/invocations", json={"prompt": "Hi?"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "no_llm" and "pip install 'koe[local-llm]'" in body["message"]


def test_barge_in_cancels_the_remote_turn_and_the_socket_serves_the_next(
    agent_server: LiveServer, fake_server: LiveServer
) -> None:
    async def main() -> None:
        async with connect(agent_server.ws_url + "/ws") as ws:
            await receive(ws)  # session
            await send(ws, {"type": "read", "text": THREE_SENTENCES, "tokens_per_s": 6})
            await until(ws, lambda m: m["type"] == "audio")
            await send(ws, {"type": "interrupt"})
            rest = await until(ws, lambda m: m["type"] == "interrupted")
            assert messages(rest)[-2]["type"] == "done" and messages(rest)[-2]["interrupted"]
            await send(ws, {"type": "read", "text": "Still here.", "tokens_per_s": 40})
            events = await until(ws, lambda m: m["type"] == "done")
            done = messages(events)[-1]
            assert done["turn"] == 1 and not done["interrupted"] and done["text"] == "Still here."
            assert any(isinstance(e, bytes) for e in events)

    run(main)
    assert fake_server.call(lambda: fake_server.runtime.scheduler.stats.queued) == 0


def test_an_unreachable_tts_is_an_error_event(fake_server: LiveServer) -> None:
    with loopback_socket() as sock:
        dead = f"http://{LOOPBACK}:{sock.getsockname()[1]}"
    settings = Settings(host=LOOPBACK, port=0)
    app = create_agent_app(VoiceAgent(RemoteSpeaker(dead, []), LLMConfig("none")))
    with run_server(app, settings) as live:
        events = sse_events(httpx.post(live.http_url + "/invocations", json={"read": "Hi."}, timeout=60))
    assert [e["type"] for e in events] == ["turn", "error", "done"]
    assert events[1]["code"] == "upstream_error" and dead.replace("http", "ws") in events[1]["message"]
