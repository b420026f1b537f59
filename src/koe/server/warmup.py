"""The server's warm-up: proof, before ``/ping`` turns 200, that the engine and the G2P work.

The proof is split in two so that a start need not wait for both in turn. The engine decodes fixed
phonemes (:func:`prove_engine`) as soon as it is loaded, while the G2P is still being built beside it
(:meth:`koe.pipeline.speech.Speech.load`, ``beside_g2p``; ONNX Runtime releases the GIL, so the two
overlap); the G2P then proves itself by reading :data:`PROOF`. Together they are the whole text path. How
fast that path is on this machine is not part of the proof: :mod:`koe.server.measurement`.

Before the proof, the modules a first request of some kind would import are imported
(:func:`import_first_use_modules`): an import holds the interpreter, so one made by a request stalls every
session's event loop for as long as it takes. After it, what the load left is put out of the garbage
collector's sight (:func:`freeze_loaded_objects`), for the same reason.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import time

import numpy as np

from koe.audio.encoder import encode_whole
from koe.audio.formats import AudioFormat
from koe.engine.base import Engine, SynthesisRequest, drain
from koe.engine.voices import VoiceBank
from koe.errors import SynthesisError
from koe.pipeline.speech import Speech
from koe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)

#: The G2P's proof, also the shorter of the two utterances timed. No untimed run precedes the timed ones:
#: ONNX Runtime's first run of a session is no slower than its second.
PROOF = "Hello there."
#: The engine's proof: one vowel, "a" in "about". Every session of a stream runs on it as on a sentence, at
#: a fraction of the cost of "Hello there."'s phonemes, and it runs beside the G2P's build, which it slows
#: by what it takes of the cores.
ENGINE_PROOF = "ə"


#: What the first request of a kind imports where nothing before ``/ping`` turns 200 has: anyio's asyncio
#: backend for Starlette's first request, the IDNA codec for a host name that is not ASCII. PyAV, which
#: imports parts of itself as a container first opens, is warmed by encoding.
FIRST_USE_MODULES = ("anyio._backends._asyncio", "encodings.idna")


def import_first_use_modules() -> None:
    """Import :data:`FIRST_USE_MODULES` now, off the event loop, instead of under a first request, and
    encode a few milliseconds in each compressed format, so that PyAV (the slowest of them to import) and
    the codecs it loads are ready too. Without PyAV (the GPU kit installs koe without it: its ladder asks
    for PCM only) nothing is encoded: a compressed format is refused there whatever the warm-up does."""
    for name in FIRST_USE_MODULES:
        importlib.import_module(name)
    if importlib.util.find_spec("av") is None:
        return
    silence = np.zeros(SAMPLE_RATE // 100, dtype=np.float32)
    for fmt in AudioFormat:
        encode_whole(silence, fmt)


def prove_engine(engine: Engine, voices: VoiceBank, voice: str) -> None:
    """Decode :data:`ENGINE_PROOF` with ``voice`` as a stream decodes (needs no G2P). Raises what the engine
    raises, or ``SynthesisError`` for a decode that gives no audio."""
    started = time.perf_counter()
    audio = drain(engine.stream(SynthesisRequest(ENGINE_PROOF, voices.resolve(voice)))).audio
    if audio.size == 0 or not np.isfinite(audio).all():
        raise SynthesisError(f"the engine's proof gave {audio.size} samples, not finite speech")
    logger.info("warm-up: the engine spoke its proof in %.2f s", time.perf_counter() - started)


def prove(speech: Speech, voice: str, engine_proven: bool = False) -> None:
    """Prove the whole text path with ``voice``: the engine's part too, unless ``engine_proven`` (done by
    :func:`prove_engine` beside the G2P's build), then the G2P's. Raises what the engine or the G2P raises,
    or ``SynthesisError`` for a G2P that reads nothing in :data:`PROOF`."""
    if not engine_proven:
        prove_engine(speech.engine, speech.voices, voice)
    if not speech.phonemize(PROOF, speech.voice(voice).lang):
        raise SynthesisError(f"the G2P read nothing speakable in {PROOF!r}")


def freeze_loaded_objects() -> None:
    """Move every object alive now out of the garbage collector's sight (``gc.freeze``), after collecting
    what is already garbage so that none of it is kept for good.

    A process that has loaded the model and every language's G2P holds some 290,000 tracked objects
    (dictionaries, spaCy's and the G2P's models), all of which live as long as the process. Each run of the
    collector's oldest generation walks them all, tens of milliseconds with the interpreter held: a stall of
    every session's event loop, ``/ping`` included, at moments no request chose. Frozen, they are never
    walked again; the collector's work is what serving allocates."""
    gc.collect()
    gc.freeze()
