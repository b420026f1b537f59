"""pipecat's Deepgram TTS services (WebSocket and HTTP), their own code, against a koe server.

Run with the clients' interpreter: ``python pipecat_deepgram.py <http-url> <key> <mode>``; prints one JSON
object: the audio each spoken text produced (base64 PCM16, keyed by pipecat's context id order), its rate,
and the errors pipecat reported. Modes: ``ws``, ``ws-interrupt``, ``http``.
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat_speak import speak

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
    try:
        return await speak(tts, texts, interrupt=mode == "ws-interrupt")
    finally:
        await session.close()


if __name__ == "__main__":
    url, key, mode, *texts = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, key, mode, texts))))
