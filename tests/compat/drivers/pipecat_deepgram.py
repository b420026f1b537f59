"""pipecat's Deepgram TTS services (WebSocket and HTTP), their own code, against a koe server.

Run with the clients' interpreter: ``python pipecat_deepgram.py <http-url> <key> <mode>``; prints one JSON
object: the audio each spoken text produced (base64 PCM16, keyed by pipecat's context id order), its rate,
and the errors pipecat reported. Modes: ``ws``, ``ws-interrupt``, ``http``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys

import aiohttp
from pipecat.frames.frames import ErrorFrame, InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat.tests.utils import SleepFrame, run_test

RATE = 16000
VOICE = "aura-2-thalia-en"


async def main(url: str, key: str, mode: str, texts: list[str]) -> dict[str, object]:
    settings = DeepgramTTSService.Settings(voice=VOICE)
    session = aiohttp.ClientSession()
    if mode == "http":
        tts = DeepgramHttpTTSService(
            api_key=key, base_url=url, aiohttp_session=session, sample_rate=RATE, settings=settings
        )
    else:
        ws_url = url.replace("http", "ws", 1)
        tts = DeepgramTTSService(api_key=key, base_url=ws_url, sample_rate=RATE, settings=settings)
    frames: list[object] = []
    for index, text in enumerate(texts):
        frames.append(TTSSpeakFrame(text))
        if mode == "ws-interrupt" and index == 0:
            frames += [SleepFrame(0.3), InterruptionFrame()]
        frames.append(SleepFrame(1.0))
    try:
        down, up = await run_test(tts, frames_to_send=frames)
    finally:
        await session.close()
    contexts: dict[str, bytes] = {}
    rates = set()
    for frame in down:
        if isinstance(frame, TTSAudioRawFrame):
            contexts[frame.context_id] = contexts.get(frame.context_id, b"") + frame.audio
            rates.add(frame.sample_rate)
    errors = [f.error for f in [*down, *up] if isinstance(f, ErrorFrame)]
    audio = [base64.b64encode(pcm).decode() for pcm in contexts.values()]
    return {"audio": audio, "rates": sorted(rates), "errors": errors}


if __name__ == "__main__":
    url, key, mode, *texts = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, key, mode, texts))))
