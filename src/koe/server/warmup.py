"""The server's warm-up: proof that the engine speaks, and the segment costs its scheduler starts from.

The costs are fitted on utterances of two lengths (about 1 and 3 s of speech), timed as they are spoken.
Timing the longer one took ~2.2 s of a ~7 s cold start here, and it gives the same answer at every start
on the same machine with the same model and settings: so what it measured is kept
(:class:`koe.machine.Measured`), and a start that finds it speaks only the short utterance — which must
succeed, as every start's must, and whose fresh timing joins the kept one. Every finished segment refines
the costs after, whichever way they began.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from koe.machine import Measured
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost

logger = logging.getLogger(__name__)

#: The proof, spoken at every start; then the utterance whose timing may be kept. No untimed run precedes
#: them: ONNX Runtime's first run of a session is no slower than its second here (measured).
PROOF = "Hello there."
TIMING = "This sentence tells the server how fast it speaks."

Sample = tuple[int, float, float]  # characters, seconds of audio, seconds of synthesis


def warm_up(speech: Speech, voice: str, windowed: bool, measured: Measured | None = None) -> SegmentCost:
    """Speak :data:`PROOF` (and :data:`TIMING`, unless ``measured`` kept its timing); with ``windowed``,
    prepare ``voice``'s windows, timed on these decodes. Raises what the engine raises."""
    samples = [_timed(speech, PROOF, voice)]
    kept = _kept(measured.read()) if measured is not None else None
    if kept is None:
        kept = _timed(speech, TIMING, voice)
        if measured is not None:
            measured.write({"text": TIMING, "sample": list(kept)})
    else:
        logger.info("warm-up: %r timed as before on this machine", TIMING)
    samples.append(kept)
    if windowed:
        # the default voice windows from the start; its windows are timed on the warm-up's decodes
        speech.engine.prepare(speech.voices.resolve(voice))
    return SegmentCost.fit(samples)


def _timed(speech: Speech, text: str, voice: str) -> Sample:
    started = time.perf_counter()
    audio = speech.synthesize(text, voice=voice)
    return len(text), len(audio) / speech.sample_rate, time.perf_counter() - started


def _kept(values: dict[str, Any] | None) -> Sample | None:
    """The kept timing of :data:`TIMING`, if it is one."""
    if values is None or values.get("text") != TIMING:
        return None
    sample = values.get("sample")
    if not (isinstance(sample, list) and len(sample) == 3 and sample[0] == len(TIMING)):
        return None
    _, audio_s, took_s = sample
    if not all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in (audio_s, took_s)):
        return None
    return len(TIMING), audio_s, took_s
