"""Telephony's audio at 8 kHz on every live route that lets a client choose its rate, on the fake engine:
μ-law where the route lets the client choose the format, PCM16 where its protocol fixes it (the AWS
sample's request, NVIDIA's session). The bytes are decoded and checked against the fake's output
resampled to 8 kHz.

(``/v1/audio/speech`` is OpenAI's, at a fixed 24 kHz; so is the agent's audio.)
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from websockets.asyncio.client import connect

from koe.audio.resample import resample
from live_server import LiveServer
from support.fake import fake_speech
from ws_events import WAIT_S, audio, messages, of_type, run, send, until

TEXT = "Hello there."
RATE = 8000
#: How closely the decoded μ-law must follow the fake's audio (μ-law keeps ~1/16 of each sample's size).
MIN_CORRELATION = 0.99
NIM_DATA = "conversation.item.speech.data"


def mulaw_decode(data: bytes) -> npt.NDArray[np.float64]:
    """G.711 μ-law bytes to samples in [-1, 1]."""
    u = ~np.frombuffer(data, dtype=np.uint8)
    exponent = (u >> 4) & 0x07
    magnitude = (((u & 0x0F).astype(np.int32) << 3) + 0x84) << exponent
    return np.where(u & 0x80, -(magnitude - 0x84), magnitude - 0x84) / 32768.0


def expected() -> npt.NDArray[np.float64]:
    """The fake's audio of :data:`TEXT` at 8 kHz."""
    return resample(fake_speech().synthesize(TEXT), 24000, RATE).astype(np.float64)


def pcm16_decode(data: bytes) -> npt.NDArray[np.float64]:
    return np.frombuffer(data, dtype="<i2") / 32768.0


def assert_is_the_text_at_8khz(decoded: npt.NDArray[np.float64]) -> None:
    reference = expected()
    assert len(decoded) == len(reference)  # 8000 samples a second
    assert float(np.corrcoef(decoded, reference)[0, 1]) > MIN_CORRELATION


async def _post(live: LiveServer, path: str, **request: object) -> bytes:
    async with httpx.AsyncClient(timeout=WAIT_S) as client:
        response = await client.post(live.http_url + path, **request)  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    return response.content


async def _invocations_whole(live: LiveServer) -> bytes:
    body = {"text": TEXT, "format": "mulaw", "sample_rate": RATE, "stream": False}
    return await _post(live, "/invocations", json=body)


async def _invocations_streamed(live: LiveServer) -> bytes:
    body = {"text": TEXT, "format": "mulaw", "sample_rate": RATE, "stream": True}
    return await _post(live, "/invocations", json=body)


async def _deepgram_rest(live: LiveServer) -> bytes:
    return await _post(live, "/v1/speak?encoding=mulaw&sample_rate=8000", json={"text": TEXT})


def _koe_socket(path: str) -> Callable[[LiveServer], Awaitable[bytes]]:
    async def speak(live: LiveServer) -> bytes:
        async with connect(f"{live.ws_url}{path}?format=mulaw&sample_rate={RATE}") as ws:
            await send(ws, {"type": "append", "text": TEXT})
            await send(ws, {"type": "flush"})
            return audio(await until(ws, of_type("flushed")))

    return speak


async def _aws_sample_request(live: LiveServer) -> bytes:
    async with connect(f"{live.ws_url}/invocations-bidirectional-stream") as ws:
        await send(ws, {"text": TEXT, "sample_rate": RATE, "request_id": "call-1"})
        return audio(await until(ws, of_type("synthesis_complete")))


async def _nim_session(live: LiveServer) -> bytes:
    """pipecat's NVIDIA client: its session update, its text and commit, base64 audio in events."""
    update = {
        "input_text_synthesis": {"voice_name": "af_heart"},
        "output_audio_params": {"sample_rate_hz": RATE},
    }
    async with connect(f"{live.ws_url}/invocations-bidirectional-stream") as ws:
        await send(ws, {"type": "synthesize_session.update", "session": update})
        await send(ws, {"type": "input_text.append", "text": TEXT + " "})
        await send(ws, {"type": "input_text.commit"})
        await send(ws, {"type": "input_text.done"})
        events = messages(await until(ws, of_type("conversation.item.speech.completed")))
    return b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == NIM_DATA)


async def _deepgram_socket(live: LiveServer) -> bytes:
    async with connect(f"{live.ws_url}/v1/speak?encoding=mulaw&sample_rate={RATE}") as ws:
        await send(ws, {"type": "Speak", "text": TEXT})
        await send(ws, {"type": "Flush"})
        return audio(await until(ws, of_type("Flushed")))


@pytest.mark.parametrize(
    ("speak", "decode"),
    [
        (_invocations_whole, mulaw_decode),
        (_invocations_streamed, mulaw_decode),
        (_deepgram_rest, mulaw_decode),
        (_koe_socket("/v1/stream"), mulaw_decode),
        (_koe_socket("/invocations-bidirectional-stream"), mulaw_decode),
        (_deepgram_socket, mulaw_decode),
        (_aws_sample_request, pcm16_decode),
        (_nim_session, pcm16_decode),
    ],
    ids=[
        "POST /invocations",
        "POST /invocations streamed",
        "POST /v1/speak",
        "WS /v1/stream",
        "WS /invocations-bidirectional-stream",
        "WS /v1/speak",
        "WS AWS sample request (PCM16)",
        "WS NVIDIA session (PCM16)",
    ],
)
def test_every_live_route_speaks_at_8khz(
    fake_server: LiveServer,
    speak: Callable[[LiveServer], Awaitable[bytes]],
    decode: Callable[[bytes], npt.NDArray[np.float64]],
) -> None:
    assert_is_the_text_at_8khz(decode(run(lambda: speak(fake_server))))


def test_the_decoder_here_is_g711s_mulaw() -> None:
    """Known code points: 0xFF and 0x7F are zero, 0x80 and 0x00 the largest positive and negative."""
    decoded = mulaw_decode(bytes([0xFF, 0x7F, 0x80, 0x00]))
    assert decoded.tolist() == [0.0, 0.0, 32124 / 32768, -32124 / 32768]
