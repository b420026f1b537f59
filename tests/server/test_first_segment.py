"""A turn's first segment decoded in windows (the default) through the real model: sent whole, it reaches
its sentence's end (the length hint's cut is joined with the rest of the phrase), reads as the whole decode
of the same segment does, lasts as long but for the lead silence it keeps, and is really decoded another way
(the audio differs)."""

from __future__ import annotations

import numpy as np
from websockets.asyncio.client import connect

from koe.engine.base import SynthesisRequest
from koe.engine.timing import SegmentTiming
from koe.pipeline.seams import trim
from koe.pipeline.speech import Speech
from live_server import ServerFactory
from support import Transcriber, words
from ws_events import Event, audio, messages, of_type, run, send, until

VOICE = "af_heart"
#: An agent's opener: one segment, long enough (> 80 frames) to be decoded in windows.
SENTENCE = "Sure, I can help you reset your password in just a minute."


def test_a_first_segment_decoded_in_windows_reads_as_the_whole_decode_and_lasts_as_long(
    speech: Speech, serve_app: ServerFactory, transcribe: Transcriber
) -> None:
    speech.engine.prepare(speech.voices.resolve(VOICE))  # calibrated, so the first segment windows
    with serve_app() as live:

        async def main() -> list[Event]:
            async with connect(live.ws_url + f"/v1/stream?voice={VOICE}") as ws:
                # whole, in one request: an append and its flush, read apart, would cut the first segment
                # of streamed text short of the sentence's end
                await send(ws, {"text": SENTENCE, "words": True})
                return await until(ws, of_type("synthesis_complete"))

        events = run(main)
    (said,) = [m["words"] for m in messages(events) if m["type"] == "words"]  # one segment: one utterance
    assert words(" ".join(w["word"] for w in said)) == words(SENTENCE)
    windowed = np.frombuffer(audio(events), dtype="<i2").astype(np.float32) / 32768
    whole = speech.synthesize(SENTENCE, voice=VOICE)  # the same segment, decoded whole
    # the windows tile the segment's exact length, with the lead a whole decode trims kept in front
    (phonemes,) = speech.phonemize(SENTENCE)
    timing = next(speech.engine.stream(SynthesisRequest(phonemes, speech.voices.resolve(VOICE))))
    assert isinstance(timing, SegmentTiming)
    assert windowed.size - whole.size == trim(timing).start
    assert np.abs(windowed[-whole.size :] - whole).max() > 0.01  # decoded another way (beyond rounding)
    assert words(transcribe(windowed)) == words(transcribe(whole)) == words(SENTENCE)
