"""Real LLMs, offline: SmolLM2-135M in llama-cpp-python, directly and behind its OpenAI-compatible server.

Needs the ``local-llm`` extra (llama-cpp-python compiles for ~10 minutes, so a quick local install may
skip these; CI installs it). The server is llama-cpp-python's own, started on a free loopback port.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from koe.agent.base import Message
from koe.agent.config import LLMConfig, local_installed
from koe.agent.events import AgentEvent, SegmentReady, TurnDone
from koe.agent.openai_compatible import OpenAICompatibleSource, OpenAIOptions
from koe.agent.pipeline import AgentOptions, AgentSession
from koe.agent.sentences import SentenceGate
from koe.errors import UpstreamError
from koe.pipeline.synthesizer import Synthesizer
from koe.text.boundary import Kind, Scanner
from koe.text.languages.lookup import rules_for
from live_checks import wait_serving
from live_server import LOOPBACK, LiveServer, loopback_socket
from support.agent import with_session
from support.fake import FakeEngine
from support.llm import serve_agent
from ws_events import messages, receive, run, send, until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_installed(), reason="the local-llm extra is not installed: pip install 'koe[local-llm]'"
    ),
]
_START_TIMEOUT_S = 120.0
THREE_FACTS = "Tell me three facts about cats, one sentence each."
QUESTION = [Message("system", "Answer in one short sentence."), Message("user", "What colour is the sky?")]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2 (one thread), as its own process."""
    from koe.agent.llama import packaged_gguf

    with loopback_socket() as sock:
        port = sock.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(packaged_gguf()),
        "--model_alias",
        "smollm2",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_ctx",
        "2048",
    ]
    log = tmp_path_factory.mktemp("llama-server") / "server.log"  # a file: llama.cpp logs a lot
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://{LOOPBACK}:{port}/v1"
    try:
        wait_serving(base + "/models", process, log, _START_TIMEOUT_S)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def stream(options: OpenAIOptions, limit: int | None = None) -> tuple[list[str], str]:
    """The deltas of one answer (the first ``limit`` of them) and the source's label."""

    async def main() -> tuple[list[str], str]:
        source = OpenAICompatibleSource(options)
        deltas: list[str] = []
        try:
            async for delta in source.stream(QUESTION):
                deltas.append(delta)
                if limit is not None and len(deltas) >= limit:
                    break
        finally:
            await source.aclose()
        return deltas, source.label

    return asyncio.run(main())


def test_the_openai_compatible_source_streams_from_a_real_server(llama_server: str) -> None:
    deltas, label = stream(OpenAIOptions("smollm2", llama_server, "none", max_tokens=30))
    assert len(deltas) > 3 and "".join(deltas).strip()
    assert label == f"openai-compatible: smollm2 at {llama_server}/"


def test_closing_the_stream_early_leaves_the_server_serving(llama_server: str) -> None:
    options = OpenAIOptions("smollm2", llama_server, "none", max_tokens=60)
    assert len(stream(options, limit=2)[0]) == 2
    assert "".join(stream(options)[0]).strip()  # the abandoned generation did not wedge the server


def test_an_error_status_is_an_upstream_error_with_the_servers_words(llama_server: str) -> None:
    with pytest.raises(UpstreamError, match="404"):
        stream(OpenAIOptions("smollm2", llama_server + "/nowhere", "none"))


def test_the_local_source_answers_in_process() -> None:
    from koe.agent.llama import LlamaOptions, LlamaSource

    source = LlamaSource(LlamaOptions(max_tokens=30))

    async def main() -> tuple[str, list[str]]:
        whole = "".join([d async for d in source.stream(QUESTION)])
        first: list[str] = []
        async for delta in source.stream(QUESTION):  # closed after one token: the thread stops
            first.append(delta)
            break
        await source.aclose()
        return whole, first

    whole, first = asyncio.run(main())
    assert whole.strip() and len(first) == 1
    assert "SmolLM2" in source.label


def test_the_agent_answers_a_question_aloud_with_the_local_model(koe_server: LiveServer) -> None:
    info = httpx.get(koe_server.http_url + "/agent/info").json()
    if not info["llm"].startswith("local"):
        pytest.skip(f"the server's agent uses {info['llm']!r} (KOE_LLM is set), not the local model")

    async def main() -> None:
        async with connect(koe_server.ws_url + "/agent/ws") as ws:
            await receive(ws)
            await send(ws, {"type": "ask", "prompt": "What is a cat? One sentence."})
            events = await until(ws, lambda m: m["type"] == "done")
        kinds = [m["type"] for m in messages(events)]
        assert kinds[0] == "turn" and "text_delta" in kinds and "segment" in kinds
        done = messages(events)[-1]
        assert done["text"].strip() and done["audio_s"] > 0 and not done["simulated"]
        assert any(isinstance(e, bytes) for e in events)

    run(main)


def test_barge_in_stops_the_local_models_answer_and_the_next_question_is_answered() -> None:
    """SmolLM2 in process, the fake engine speaking: synthesis after the first segment is held, so the
    answer is still being spoken when the listener interrupts after its first audio."""
    held = threading.Event()
    config = LLMConfig("local", max_tokens=80)
    with serve_agent(config, FakeEngine(gate=held, gate_after=1)) as live:

        async def main() -> None:
            async with connect(live.ws_url + "/agent/ws") as ws:
                await receive(ws)  # session
                await send(ws, {"type": "ask", "prompt": THREE_FACTS})
                heard = messages(await until(ws, lambda m: m["type"] == "audio"))
                await receive(ws)  # the first segment's samples
                await send(ws, {"type": "interrupt", "heard_segments": 1})
                rest = messages(await until(ws, lambda m: m["type"] == "interrupted"))
                held.set()
                done, interrupted = rest[-2:]
                assert done["type"] == "done" and done["interrupted"] and not done["simulated"]
                (segment,) = [m for m in heard if m["type"] == "segment"]
                assert interrupted["heard_text"] == done["text"]
                assert done["text"].strip().endswith(segment["text"].strip())  # what was heard, no more
                await send(ws, {"type": "ask", "prompt": "What colour is the sky? One short sentence."})
                answer = messages(await until(ws, lambda m: m["type"] == "done"))
                assert answer[0]["type"] == "turn" and "SmolLM2" in answer[0]["source"]
                assert not answer[-1]["interrupted"] and answer[-1]["text"].strip()
                assert answer[-1]["audio_s"] > 0 and answer[-1]["turn"] == 1

        run(main)


def test_the_local_agent_answers_the_hiking_question_in_a_few_whole_sentences_none_repeated() -> None:
    """The question SmolLM2 once answered with one sentence ten times, cut off at the token cap."""
    from koe.agent.llama import LlamaSource

    source = LlamaSource()

    async def main(session: AgentSession, synthesizer: Synthesizer) -> list[AgentEvent]:
        turn = await session.start("What should I pack for a weekend hiking trip?", source)
        events = [event async for event in session.events(turn)]
        await source.aclose()
        return events

    events = with_session(main)
    done = events[-1]
    assert isinstance(done, TurnDone) and not done.interrupted
    check = SentenceGate(max_sentences=100)
    assert check.feed(done.text) + check.finish() == done.text and check.dropped == 0  # no sentence twice
    assert done.text.rstrip()[-1] in ".!?"
    segments = [e for e in events if isinstance(e, SegmentReady)]
    assert segments and segments[-1].text.rstrip()[-1] in ".!?"
    assert _sentence_count(done.text) <= AgentOptions().max_answer_sentences


def _sentence_count(text: str) -> int:
    rules = rules_for("en-us")
    scanner = Scanner(rules.abbreviations, rules.inverted_marks)
    scanner.feed(text)
    return sum(boundary.kind >= Kind.SENTENCE for boundary in scanner.scan(True))
