"""How agent events are written: Server-Sent Events with base64 audio, WebSocket JSON plus binary."""

from __future__ import annotations

import base64
import json

from koe.agent.events import AUDIO_FRAME_BYTES, AudioReady, TextDelta, Timings, TurnDone, to_frames, to_sse


def test_an_audio_event_over_sse_carries_base64_pcm_and_its_rate() -> None:
    pcm = bytes(range(8))
    sse = to_sse(AudioReady(3, 1, 24000, pcm))
    assert sse.startswith("event: audio\ndata: ") and sse.endswith("\n\n")
    body = json.loads(sse.split("data: ", 1)[1])
    assert body == {
        "type": "audio",
        "turn": 3,
        "index": 1,
        "sample_rate": 24000,
        "audio": base64.b64encode(pcm).decode(),
        "bytes": 8,
    }


def test_an_audio_event_over_websocket_is_a_header_then_the_samples() -> None:
    header, samples = to_frames(AudioReady(0, 2, 24000, b"\x01\x00\x02\x00"))
    assert json.loads(str(header)) == {
        "type": "audio",
        "turn": 0,
        "index": 2,
        "sample_rate": 24000,
        "bytes": 4,
    }
    assert samples == b"\x01\x00\x02\x00"


def test_a_long_segment_goes_in_pieces_under_agentcores_frame_limit() -> None:
    """AgentCore Runtime closes a WebSocket whose frame passes 32 KB: 3 s of audio is 144 000 bytes."""
    pcm = bytes(range(256)) * (3 * 24000 * 2 // 256) + b"\x07\x00" * 125
    frames = to_frames(AudioReady(4, 1, 24000, pcm))
    headers, pieces = [json.loads(str(f)) for f in frames[::2]], frames[1::2]
    assert all(isinstance(p, bytes) and 0 < len(p) <= AUDIO_FRAME_BYTES < 32_000 for p in pieces)
    assert all(len(p) % 2 == 0 for p in pieces)  # whole 16-bit samples
    assert b"".join(p for p in pieces if isinstance(p, bytes)) == pcm
    assert [h["bytes"] for h in headers] == [len(p) for p in pieces]
    assert {(h["type"], h["turn"], h["index"]) for h in headers} == {("audio", 4, 1)}
    assert len(pieces) == -(-len(pcm) // AUDIO_FRAME_BYTES)


def test_done_carries_its_timings_and_other_events_stay_one_line() -> None:
    done = TurnDone(1, "Hi.", False, 0.5, Timings(120.0, 900.5, 300.0, 1500.0), True)
    (frame,) = to_frames(done)
    assert json.loads(str(frame))["timings"] == {
        "first_token_ms": 120.0,
        "first_audio_ms": 900.5,
        "text_done_ms": 300.0,
        "total_ms": 1500.0,
    }
    assert to_sse(TextDelta(0, "a\nb")).count("\n") == 3  # the newline inside the text is escaped
