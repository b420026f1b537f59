"""Deepgram's Python SDK against a koe server: its REST ``generate`` and its WebSocket client, with a key.

``python deepgram_sdk.py <http-url> <key> <mode> <text>...``; modes ``rest`` (linear16 in a WAV container,
as Deepgram sends it by default), ``ws`` (Speak, Flush per text; then Clear and Close), ``rest-wrong-key``.
Prints the audio per text (base64), the server's replies, and the error the SDK raised, if any.
"""

from __future__ import annotations

import base64
import json
import sys

from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from deepgram.speak.v1.types import SpeakV1Flush, SpeakV1Text

RATE = 16000
MODEL = "aura-2-thalia-en"


def main(url: str, key: str, mode: str, texts: list[str]) -> dict[str, object]:
    ws_url = url.replace("http", "ws", 1)
    environment = DeepgramClientEnvironment(base=url, production=ws_url, agent=ws_url, agent_rest=url)
    client = DeepgramClient(api_key=key, environment=environment)
    audio: list[bytes] = []
    replies: list[dict[str, object]] = []
    try:
        if mode.startswith("rest"):
            for text in texts:
                chunks = client.speak.v1.audio.generate(
                    text=text, model=MODEL, encoding="linear16", container="wav", sample_rate=RATE
                )
                audio.append(b"".join(chunks))
        else:
            with client.speak.v1.connect(model=MODEL, encoding="linear16", sample_rate=str(RATE)) as socket:
                for text in texts:
                    socket.send_text(SpeakV1Text(type="Speak", text=text))
                    socket.send_flush(SpeakV1Flush(type="Flush"))
                    pcm = b""
                    while True:
                        message = socket.recv()
                        if isinstance(message, bytes):
                            pcm += message
                            continue
                        replies.append(message.dict())
                        if message.type == "Flushed":
                            break
                    audio.append(pcm)
                socket.send_close()
    except ApiError as exc:
        return {"audio": [], "replies": replies, "error": {"status": exc.status_code, "body": exc.body}}
    return {"audio": [base64.b64encode(pcm).decode() for pcm in audio], "replies": replies, "error": None}


if __name__ == "__main__":
    url, key, mode, *texts = sys.argv[1:]
    print(json.dumps(main(url, key, mode, texts), default=str))
