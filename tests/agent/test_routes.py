"""The agent's endpoints in a live ``koe serve`` app: the page, /agent/ping, SSE invocations, browser WS."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from live_checks import server_tasks, wait_for
from live_server import LiveServer, ServerFactory
from sse_events import THREE_SENTENCES, segment_words, sse_events
from support import words
from support.fake import FakeEngine
from support.llm import HeldLLM, serve_agent
from ws_events import WAIT_S, messages, receive, run, send, until


def test_the_page_and_its_modules_are_served(fake_server: LiveServer) -> None:
    page = httpx.get(fake_server.http_url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="app.js">' in page.text
    for name in ("app.js", "player.js", "player-worklet.js"):
        module = httpx.get(f"{fake_server.http_url}/{name}")
        assert module.status_code == 200 and "javascript" in module.headers["content-type"]
    assert httpx.get(fake_server.http_url + "/nothing-here.js").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("GET", "/invocations", "POST"), ("GET", "/v1/audio/speech", "POST"), ("POST", "/ping", "GET, HEAD")],
)
def test_a_wrong_method_is_405_not_the_pages_404(
    fake_server: LiveServer, method: str, path: str, allowed: str
) -> None:
    response = httpx.request(method, fake_server.http_url + path)
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == set(allowed.split(", "))


def test_ping_and_info_describe_the_agent(fake_server: LiveServer) -> None:
    assert httpx.get(fake_server.http_url + "/agent/ping").json() == {"status": "Healthy"}
    info = httpx.get(fake_server.http_url + "/agent/info").json()
    assert info["sample_rate"] == 24000 and info["default_voice"] == "af_heart"
    assert "af_heart" in info["voices"] and "bm_george" in info["voices"]
    assert isinstance(info["llm"], str) and isinstance(info["llm_available"], bool)
    assert (info["how_to_enable"] is None) == info["llm_available"]


def test_an_invocation_streams_text_segments_and_audio_as_sse(fake_server: LiveServer) -> None:
    body = {"read": THREE_SENTENCES, "tokens_per_s": 100, "first_token_delay_s": 0, "voice": "af_sky"}
    with httpx.Client(timeout=120) as client:
        response = client.post(fake_server.http_url + "/agent/invocations", json=body)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn" and events[0]["simulated"] and "simulation" in events[0]["source"]
    assert kinds[-1] == "done" and not events[-1]["interrupted"] and events[-1]["simulated"]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == THREE_SENTENCES
    segments = [e for e in events if e["type"] == "segment"]
    audio = [e for e in events if e["type"] == "audio"]
    # each segment's audio follows it, in one event or (decoded in windows) in pieces, in order
    indices = [a["index"] for a in audio]
    assert indices == sorted(indices) and list(dict.fromkeys(indices)) == [s["index"] for s in segments]
    for segment in segments:
        start, end = segment["source_span"]
        assert THREE_SENTENCES[start:end] == segment["text"]
    assert [w.lower() for w in segment_words(THREE_SENTENCES, events)] == words(THREE_SENTENCES)
    pcm = [base64.b64decode(a["audio"]) for a in audio]
    assert all(a["sample_rate"] == 24000 and len(p) == a["bytes"] for a, p in zip(audio, pcm, strict=True))
    assert events[-1]["audio_s"] == pytest.approx(sum(map(len, pcm)) / 48000, abs=0.002)


def test_an_asked_answer_is_heard_over_sse_before_the_llm_has_written_it() -> None:
    """The LLM holds the rest of its answer until the first audio event has arrived."""
    llm = HeldLLM("Cats sleep a lot. ", "They also like to climb. And they purr when they are happy.")
    events: list[dict[str, Any]] = []
    with (
        llm.serving() as config,
        serve_agent(config) as live,
        httpx.Client(timeout=WAIT_S) as client,
        client.stream("POST", live.http_url + "/agent/invocations", json={"prompt": "Cats?"}) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
                if events[-1]["type"] == "audio" and not llm.release.is_set():
                    written = "".join(e["text"] for e in events if e["type"] == "text_delta")
                    assert written == llm.first  # heard while the rest was still unwritten
                    llm.release.set()
    assert llm.release.is_set() and events[-1]["type"] == "done" and not events[-1]["interrupted"]
    assert events[-1]["text"] == llm.answer and not events[-1]["simulated"]
    timings = events[-1]["timings"]
    assert timings["first_token_ms"] <= timings["first_audio_ms"] <= timings["text_done_ms"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{", 400, "invalid_json"),
        (b'{"read": "   "}', 400, "invalid_field"),
        (b'{"read": "Hi.", "speed": 7}', 400, "invalid_field"),
        (json.dumps({"read": "x" * 40_000}).encode(), 413, "body_too_large"),
    ],
)
def test_bad_invocations_get_a_json_error(
    fake_server: LiveServer, body: bytes, status: int, code: str
) -> None:
    response = httpx.post(fake_server.http_url + "/agent/invocations", content=body)
    assert response.status_code == status
    assert response.json()["error"] == code


def test_an_unknown_voice_is_an_error_event_and_the_turn_ends(fake_server: LiveServer) -> None:
    response = httpx.post(
        fake_server.http_url + "/agent/invocations", json={"read": "Hello.", "voice": "xx_nobody"}, timeout=60
    )
    events = sse_events(response)
    assert [e["type"] for e in events] == ["turn", "error", "done"]
    assert events[1]["code"] == "unknown_voice" and "af_heart" in events[1]["message"]


def test_the_browser_socket_streams_a_turn_then_stops_the_next_at_once(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/agent/ws") as ws:
            session = await receive(ws)
            assert isinstance(session, dict) and session["type"] == "session"
            await send(ws, {"type": "read", "text": "Short and sweet.", "tokens_per_s": 50})
            events = await until(ws, lambda m: m["type"] == "done")
            kinds = [e["type"] if isinstance(e, dict) else "pcm" for e in events]
            assert kinds[0] == "turn" and kinds[-1] == "done"
            for i, kind in enumerate(kinds):  # each audio header is followed by its samples
                if kind == "audio":
                    header, frame = events[i], events[i + 1]
                    assert isinstance(header, dict) and isinstance(frame, bytes)
                    assert kinds[i + 1] == "pcm" and len(frame) == header["bytes"]

            await send(ws, {"type": "read", "text": THREE_SENTENCES, "tokens_per_s": 6})
            await until(ws, lambda m: m["type"] == "audio")
            await receive(ws)  # the first segment's samples
            await send(ws, {"type": "interrupt", "heard_segments": 1})
            rest = await until(ws, lambda m: m["type"] == "interrupted")
            assert [m["type"] for m in messages(rest)][-2:] == ["done", "interrupted"]
            # nothing new of the turn after the interrupt: at most the rest of the audio event being sent
            assert "segment" not in [m["type"] for m in messages(rest)]
            assert {m["index"] for m in messages(rest) if m["type"] == "audio"} <= {0}
            done, interrupted = messages(rest)[-2:]
            assert done["interrupted"] and done["turn"] == 1
            assert interrupted["heard_text"] == done["text"] and THREE_SENTENCES.startswith(done["text"])

            await send(ws, {"type": "ask"})  # a bad request: the session stays open
            error = await receive(ws)
            assert isinstance(error, dict) and error["type"] == "error" and error["turn"] is None

    run(main)


def test_a_client_that_leaves_mid_answer_stops_its_turn(serve_fake: ServerFactory) -> None:
    """Synthesis after the first segment is held until the client has left; once the server's tasks are
    back to what they were, nothing is left that could synthesize the rest."""
    body = {"read": " ".join([THREE_SENTENCES] * 4), "tokens_per_s": 8, "first_token_delay_s": 0}
    later = threading.Event()
    with serve_fake(FakeEngine(gate=later, gate_after=1)) as live:
        tasks = server_tasks(live)
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", live.http_url + "/agent/invocations", json=body) as response,
        ):
            for line in response.iter_lines():
                if line == "event: audio":
                    break  # leave after the first audio, with most of the answer unwritten
        later.set()
        wait_for(lambda: server_tasks(live) <= tasks, "the turn's tasks to end")
        stats = live.call(lambda: live.runtime.scheduler.stats)
    # the segment held when the client left may finish; nothing after it was synthesized
    assert stats.queued == 0 and stats.running == 0 and stats.completed <= 2
