"""One first-segment rule: the agent's read-aloud and ``/v1/stream`` speak the same streamed text alike,
whether the agent speaks through this process's engine or through a remote koe (``koe agent --tts``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.asyncio.client import connect

from koe.agent.config import LLMConfig
from koe.agent.remote import RemoteSpeaker
from koe.agent.replay import ReplayPace, ReplaySource
from koe.agent.routes import create_agent_app
from koe.agent.service import VoiceAgent
from koe.client.target import parse_target
from koe.client.websocket import connect as connect_stream
from koe.client.websocket import stream_url
from koe.engine.timing import FRAME_SAMPLES
from koe.settings import Settings
from koe.wire.messages import Flushed, SegmentEnd, SegmentStart
from live_server import LOOPBACK, LiveServer, ServerFactory, run_server
from support.fake import WINDOW_FRAMES, FakeEngine
from ws_events import Event, messages, of_type, receive, run, send, until

#: A first sentence long enough at half speed for the fake engine to decode it in windows (over 100 frames).
TEXT = "Certainly, the quickest way to the museum is the train. Then walk."
SPEED = 0.5
PACE = ReplayPace(tokens_per_s=20.0, first_token_delay_s=0.0)
#: Well within the fake engine's 30 s hold, far beyond a first window's decode on a loaded machine.
FIRST_AUDIO_WAIT_S = 20.0


@contextmanager
def _remote_agent(tts: LiveServer) -> Iterator[LiveServer]:
    """``koe agent`` speaking through the koe server ``tts``."""
    speaker = RemoteSpeaker(parse_target(tts.ws_url, environ={}), ["af_heart"])
    app = create_agent_app(VoiceAgent(speaker, LLMConfig("none")))
    with run_server(app, Settings(host=LOOPBACK, port=0)) as agent:
        yield agent


def _read_request() -> dict[str, Any]:
    """The agent's read-aloud of :data:`TEXT` at :data:`SPEED` and :data:`PACE`."""
    return {"type": "read", "text": TEXT, "speed": SPEED, "tokens_per_s": PACE.tokens_per_s,
            "first_token_delay_s": PACE.first_token_delay_s}  # fmt: skip


async def _agent_first_segment(agent_ws_url: str) -> tuple[str, list[bytes]]:
    """The agent's read-aloud of :data:`TEXT` on its socket at ``agent_ws_url``: its first segment."""
    async with connect(agent_ws_url) as ws:
        await receive(ws)  # the session
        await send(ws, _read_request())
        return _first_segment(await until(ws, of_type("done")))


def _first_segment(events: list[Event]) -> tuple[str, list[bytes]]:
    """A turn's first segment among the agent socket's ``events``: its text and its audio pieces as they
    came (one per ``audio`` event; the socket may send a piece in several frames)."""
    text, pieces, index = None, [], None
    for event in events:
        if isinstance(event, bytes):
            if index == 0:
                pieces[-1] += event
        elif event["type"] == "segment" and event["index"] == 0:
            text = event["text"]
        elif event["type"] == "audio":
            index = event["index"]
            if index == 0:
                pieces.append(b"")
    assert text is not None
    return text, pieces


async def _stream_first_segment(server: LiveServer) -> tuple[str, bytes]:
    """``/v1/stream``'s first segment for the same tokens at the same pace: its text and its audio."""
    client = await connect_stream(stream_url(server.http_url, voice="af_heart", speed=SPEED))
    try:
        async for token in ReplaySource(TEXT, PACE).stream([]):
            await client.append(token)
        await client.flush()
        text, audio, first = None, bytearray(), True
        while True:
            message: Any = await client.receive()
            if isinstance(message, bytes):
                if first:
                    audio += message
            elif isinstance(message, SegmentStart) and message.index == 0:
                text = message.text
            elif isinstance(message, SegmentEnd):
                first = False
            elif isinstance(message, Flushed):
                assert text is not None
                return text, bytes(audio)
    finally:
        await client.aclose()


def test_the_agent_speaks_a_streamed_first_segment_as_v1_stream_does(fake_server: LiveServer) -> None:
    agent_text, agent_pieces = run(lambda: _agent_first_segment(fake_server.ws_url + "/agent/ws"))
    stream_text, stream_audio = run(lambda: _stream_first_segment(fake_server))
    assert agent_text == stream_text and TEXT.startswith(agent_text)  # cut at the same place
    # decoded the same way, in windows, and passed on a window at a time as each is decoded (not a whole
    # decode's audio sent at its end, in frames of the socket's largest size)
    assert b"".join(agent_pieces) == stream_audio
    window_bytes = WINDOW_FRAMES * FRAME_SAMPLES * 2
    assert len(agent_pieces) > 1 and {len(piece) for piece in agent_pieces[:-1]} == {window_bytes}


def test_the_remote_agents_first_audio_does_not_wait_for_the_segments_end(
    serve_fake: ServerFactory,
) -> None:
    """The TTS engine decodes the first window and then holds: the agent's client still hears the
    segment begin, before the server can have decoded the rest of it or sent its ``segment_end``; the
    pieces, once all came, are the segment ``/v1/stream`` sends for the same text."""
    held = threading.Event()

    async def main(agent: LiveServer) -> tuple[str, list[bytes]]:
        async with connect(agent.ws_url + "/ws") as ws:
            await receive(ws)  # the session
            await send(ws, _read_request())
            try:
                async with asyncio.timeout(FIRST_AUDIO_WAIT_S):
                    before = await until(ws, of_type("audio"))
            finally:
                held.set()
            assert messages(before)[-1]["index"] == 0
            (segment,) = [m for m in messages(before) if m["type"] == "segment"]
            assert segment["duration_s"] is None  # its length is not known before its end
            after = await until(ws, of_type("done"))
            assert "error" not in {m["type"] for m in messages(after)}
            return _first_segment(before + after)

    with serve_fake(FakeEngine(gate=held, gate_after=1)) as tts:
        with _remote_agent(tts) as agent:
            agent_text, agent_pieces = run(lambda: main(agent))
        stream_text, stream_audio = run(lambda: _stream_first_segment(tts))
    assert agent_text == stream_text and b"".join(agent_pieces) == stream_audio
    # a control: the segment is longer than one window, so the engine held the rest of it above
    assert len(stream_audio) > WINDOW_FRAMES * FRAME_SAMPLES * 2
