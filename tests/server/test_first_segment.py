"""A turn's first segment decoded in windows (the default) through the real model: it reads as the whole
decode does, lasts as long, and is really decoded another way (the audio differs)."""

from __future__ import annotations

import numpy as np
from websockets.asyncio.client import connect

from koe.pipeline.speech import Speech
from koe.types import Audio
from live_server import ServerFactory
from support import Transcriber, words
from ws_events import audio, of_type, run, send, until

VOICE = "af_heart"
#: An agent's opener: one segment, long enough (> 100 frames) to be decoded in windows.
SENTENCE = "Sure, I can help you reset your password in just a minute."


def _turn_audio(serve_app: ServerFactory, windowed_first: bool) -> Audio:
    with serve_app(windowed_first=windowed_first) as live:

        async def main() -> bytes:
            async with connect(live.ws_url + f"/v1/stream?voice={VOICE}") as ws:
                await send(ws, {"type": "append", "text": SENTENCE})
                await send(ws, {"type": "flush"})
                return audio(await until(ws, of_type("flushed")))

        return np.frombuffer(run(main), dtype="<i2").astype(np.float32) / 32768


def test_a_first_segment_decoded_in_windows_reads_as_the_whole_decode_and_lasts_as_long(
    speech: Speech, serve_app: ServerFactory, transcribe: Transcriber
) -> None:
    speech.engine.prepare(speech.voices.resolve(VOICE))  # calibrated, so the first segment windows
    windowed, whole = _turn_audio(serve_app, True), _turn_audio(serve_app, False)
    assert windowed.size == whole.size  # the windows tile the segment's exact length
    assert not np.array_equal(windowed, whole)  # decoded another way
    assert words(transcribe(windowed)) == words(transcribe(whole)) == words(SENTENCE)
