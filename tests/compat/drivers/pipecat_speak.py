"""What both pipecat drivers do with a TTS service: speak each text in a pipeline (pipecat's own test
runner), optionally interrupting the first, and report the audio per context, its rates and the errors."""

from __future__ import annotations

import base64

from pipecat.frames.frames import ErrorFrame, Frame, InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.services.tts_service import TTSService
from pipecat.tests.utils import SleepFrame, run_test

#: The user barges in this long after the first text was handed to the service.
INTERRUPT_AFTER_S = 0.3
#: Time for a text's audio to arrive before the next text (the fake engine is fast).
SPEAK_S = 1.0


async def speak(tts: TTSService, texts: list[str], *, interrupt: bool) -> dict[str, object]:
    frames: list[Frame] = []
    for index, text in enumerate(texts):
        frames.append(TTSSpeakFrame(text))
        if interrupt and index == 0:
            frames += [SleepFrame(INTERRUPT_AFTER_S), InterruptionFrame()]
        frames.append(SleepFrame(SPEAK_S))
    down, up = await run_test(tts, frames_to_send=frames)
    contexts: dict[str | None, bytes] = {}
    rates = set()
    for frame in down:
        if isinstance(frame, TTSAudioRawFrame):
            contexts[frame.context_id] = contexts.get(frame.context_id, b"") + frame.audio
            rates.add(frame.sample_rate)
    errors = [f.error for f in [*down, *up] if isinstance(f, ErrorFrame)]
    audio = [base64.b64encode(pcm).decode() for pcm in contexts.values()]
    return {"audio": audio, "rates": sorted(rates), "errors": errors}
