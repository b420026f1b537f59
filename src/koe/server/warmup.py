"""The server's warm-up: proof that the engine and the G2P work, and the costs its scheduler starts from.

The proof is split in two so that a start need not wait for both in turn. The engine decodes fixed
phonemes (:func:`prove_engine`) as soon as it is loaded, while the G2P is still being built beside it
(:meth:`koe.pipeline.speech.Speech.load`, ``beside_g2p``; ONNX Runtime releases the GIL, so the two
overlap); the G2P then proves itself by reading :data:`PROOF`. Together they are the whole text path.

The costs are fitted on utterances of two lengths (about 1 and 3 s of speech), timed as they are spoken
through the whole path. Timing them took ~2.2 s of a ~7 s cold start here, and they give the same answer at
every start on the same machine with the same model and settings: so what was measured is kept
(:class:`koe.machine.Measured`), and a later start times nothing. Every finished segment refines the costs
after, whichever way they began. The engine is prepared for windowed decoding (:meth:`Engine.prepare`) only
after them: where its own step costs are not kept either, it times them on the windows of a decode already
made (the longer utterance's), not on a probe of its own (~0.9 s of a first start here).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from koe.engine.base import Engine, SynthesisRequest, drain
from koe.engine.voices import VoiceBank
from koe.errors import SynthesisError
from koe.machine import Measured
from koe.pipeline.speech import Speech
from koe.scheduler.cost import SegmentCost

logger = logging.getLogger(__name__)

#: The G2P's proof, also the shorter of the two utterances timed. No untimed run precedes the timed ones:
#: ONNX Runtime's first run of a session is no slower than its second (measured).
PROOF = "Hello there."
#: The engine's proof: one vowel, "a" in "about". Every session of a stream runs on it as on a sentence, at
#: half the cost of "Hello there."'s phonemes (0.34–0.47 s against 0.69–0.88 s here: one-off observation,
#: 2026-12-01), and it runs beside the G2P's build, which it slows by what it takes of the two cores.
ENGINE_PROOF = "ə"
#: The longer utterance of the two whose timings are fitted.
TIMING = "This sentence tells the server how fast it speaks."
#: What is timed, in order: part of the key its timings are kept under.
TIMED = (PROOF, TIMING)

Sample = tuple[int, float, float]  # characters, seconds of audio, seconds of synthesis


def prove_engine(engine: Engine, voices: VoiceBank, voice: str) -> None:
    """Decode :data:`ENGINE_PROOF` with ``voice`` as a stream decodes (needs no G2P). Raises what the engine
    raises, or ``SynthesisError`` for a decode that gives no audio."""
    started = time.perf_counter()
    audio = drain(engine.stream(SynthesisRequest(ENGINE_PROOF, voices.resolve(voice)))).audio
    if audio.size == 0 or not np.isfinite(audio).all():
        raise SynthesisError(f"the engine's proof gave {audio.size} samples, not finite speech")
    logger.info("warm-up: the engine spoke its proof in %.2f s", time.perf_counter() - started)


def warm_up(
    speech: Speech, voice: str, windowed: bool, measured: Measured | None = None, engine_proven: bool = False
) -> SegmentCost:
    """Prove the whole text path with ``voice`` (the engine's part too, unless ``engine_proven``: done by
    :func:`prove_engine`) and fit the segment costs: kept in ``measured`` if an earlier start timed them,
    timed now (and kept) otherwise; ``measured``'s key names :data:`TIMED`. With ``windowed``, prepare
    ``voice``'s windows after. Raises what the engine or the G2P raises."""
    if not engine_proven:
        prove_engine(speech.engine, speech.voices, voice)
    if not speech.phonemize(PROOF, speech.voice(voice).lang):
        raise SynthesisError(f"the G2P read nothing speakable in {PROOF!r}")
    samples = _kept(measured.read()) if measured is not None else None
    if samples is None:
        samples = [_timed(speech, text, voice) for text in TIMED]
        if measured is not None:
            measured.write({"samples": [list(sample) for sample in samples]})
    else:
        logger.info("warm-up: %r and %r timed as before on this machine", PROOF, TIMING)
    if windowed:  # the default voice windows from the start
        speech.engine.prepare(speech.voices.resolve(voice))
    return SegmentCost.fit(samples)


def _timed(speech: Speech, text: str, voice: str) -> Sample:
    started = time.perf_counter()
    audio = speech.synthesize(text, voice=voice)
    return len(text), len(audio) / speech.sample_rate, time.perf_counter() - started


def _kept(values: dict[str, Any] | None) -> list[Sample] | None:
    """The kept timings of :data:`TIMED`, if they are that."""
    samples = None if values is None else values.get("samples")
    if not (isinstance(samples, list) and len(samples) == len(TIMED)):
        return None
    kept: list[Sample] = []
    for text, sample in zip(TIMED, samples, strict=True):
        if not (isinstance(sample, list) and len(sample) == 3 and sample[0] == len(text)):
            return None
        _, audio_s, took_s = sample
        if not all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in (audio_s, took_s)):
            return None
        kept.append((len(text), audio_s, took_s))
    return kept
