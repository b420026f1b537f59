"""LiveKit's Deepgram and OpenAI TTS plugins, their own code, against a koe server.

``python livekit_tts.py <http-url> <key> <mode> <text>...``; modes ``deepgram-synthesize`` (REST),
``deepgram-stream`` (WebSocket, the text pushed in pieces), ``deepgram-interrupt`` (the first text's stream
closed after its first audio, as an agent does when the user barges in; its audio is left out of the
result), ``openai-synthesize``. Prints the audio
(base64 PCM16 per text), its rate, the request ids the plugin saw, and the warnings it logged.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys

import aiohttp
from livekit.agents import tts as agents_tts
from livekit.plugins import deepgram, openai

RATE = 16000


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


async def _collect(stream: agents_tts.ChunkedStream | agents_tts.SynthesizeStream) -> tuple[bytes, int, str]:
    pcm, rate, request_id = b"", 0, ""
    async for event in stream:
        pcm += event.frame.data.tobytes()
        rate, request_id = event.frame.sample_rate, event.request_id
    return pcm, rate, request_id


async def main(url: str, key: str, mode: str, texts: list[str]) -> dict[str, object]:
    warnings = _Warnings()
    logging.getLogger().addHandler(warnings)
    results = []
    async with aiohttp.ClientSession() as session:
        if mode.startswith("deepgram"):
            tts: agents_tts.TTS = deepgram.TTS(
                api_key=key,
                base_url=url + "/v1/speak",
                model="aura-2-thalia-en",
                sample_rate=RATE,
                http_session=session,
            )
        else:
            tts = openai.TTS(
                base_url=url + "/v1", api_key=key, model="tts-1", voice="alloy", response_format="pcm"
            )
        for index, text in enumerate(texts):
            if mode == "deepgram-interrupt" and index == 0:
                stream = tts.stream()
                stream.push_text(text)
                stream.flush()
                async for _event in stream:
                    break  # the user started talking
                await stream.aclose()
            elif mode in ("deepgram-stream", "deepgram-interrupt"):
                stream = tts.stream()
                for word in text.split(" "):
                    stream.push_text(word + " ")
                stream.end_input()
                async with stream:
                    results.append(await _collect(stream))
            else:
                async with tts.synthesize(text) as chunked:
                    results.append(await _collect(chunked))
        await tts.aclose()
    return {
        "audio": [base64.b64encode(pcm).decode() for pcm, _, _ in results],
        "rates": sorted({rate for _, rate, _ in results}),
        "request_ids": [request_id for _, _, request_id in results],
        "warnings": warnings.seen,
    }


if __name__ == "__main__":
    url, key, mode, *texts = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, key, mode, texts))))
