"""One first-segment rule: the agent's read-aloud and ``/v1/stream`` speak the same streamed text alike."""

from __future__ import annotations

from typing import Any

from websockets.asyncio.client import connect

from koe.agent.replay import ReplayPace, ReplaySource
from koe.client.websocket import connect as connect_stream
from koe.client.websocket import stream_url
from koe.engine.timing import FRAME_SAMPLES
from koe.wire.messages import Flushed, SegmentEnd, SegmentStart
from live_server import LiveServer
from support.fake import WINDOW_FRAMES
from ws_events import receive, run, send

#: A first sentence long enough at half speed for the fake engine to decode it in windows (over 100 frames).
TEXT = "Certainly, the quickest way to the museum is the train. Then walk."
SPEED = 0.5
PACE = ReplayPace(tokens_per_s=20.0, first_token_delay_s=0.0)


async def _agent_first_segment(server: LiveServer) -> tuple[str, list[bytes]]:
    """The agent's read-aloud of :data:`TEXT`: its first segment's text and audio pieces as they came."""
    pieces: list[bytes] = []
    async with connect(server.ws_url + "/agent/ws") as ws:
        await receive(ws)  # the session
        request = {"type": "read", "text": TEXT, "speed": SPEED, "tokens_per_s": PACE.tokens_per_s,
                   "first_token_delay_s": PACE.first_token_delay_s}  # fmt: skip
        await send(ws, request)
        text, header = None, None
        while True:
            event = await receive(ws)
            if isinstance(event, bytes):
                assert header is not None
                if header["index"] == 0:
                    pieces.append(event)
                continue
            event_type = event["type"]
            if event_type == "segment" and event["index"] == 0:
                text = event["text"]
            elif event_type == "audio":
                header = event
            elif event_type == "done":
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
    agent_text, agent_pieces = run(lambda: _agent_first_segment(fake_server))
    stream_text, stream_audio = run(lambda: _stream_first_segment(fake_server))
    assert agent_text == stream_text and TEXT.startswith(agent_text)  # cut at the same place
    # decoded the same way, in windows, and passed on a window at a time as each is decoded (not a whole
    # decode's audio sent at its end, in frames of the socket's largest size)
    assert b"".join(agent_pieces) == stream_audio
    window_bytes = WINDOW_FRAMES * FRAME_SAMPLES * 2
    assert len(agent_pieces) > 1 and {len(piece) for piece in agent_pieces[:-1]} == {window_bytes}
