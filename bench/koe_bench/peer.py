"""The peer library, ``kokoro-onnx``, in this process on koe's own model and voices.

kokoro-onnx takes file paths, so the joined int8 model and the voice tables are written to a temporary
directory for it. It runs with its own defaults (its G2P is espeak-ng, its ONNX session uses every core),
which is what a user of that library gets; koe's side of the comparison is its server, same text, voice.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

from koe.engine.voices import VoiceBank
from koe_bench.stats import Chunk, onset_s
from koe_bench.turns import TurnTrace

PEER = "kokoro-onnx"
LANG = "en-us"
#: What it is given, in the caller's directory (fastkokoro reads the same two files).
MODEL_FILE, VOICES_FILE = "model.onnx", "voices.npz"


def load_kokoro_onnx(model: bytes, voices: VoiceBank, workdir: Path) -> Any:
    """A ``kokoro_onnx.Kokoro`` on ``model`` and every voice of ``voices``, files kept in ``workdir``.

    kokoro-onnx is a dependency of koe-bench (``koe bench`` checks for it before it starts).
    """
    from kokoro_onnx import Kokoro

    model_path, voices_path = workdir / MODEL_FILE, workdir / VOICES_FILE
    model_path.write_bytes(model)
    tables: dict[str, Any] = {name: voices.resolve(name) for name in voices.names()}
    np.savez(voices_path, **tables)
    return Kokoro(str(model_path), str(voices_path))


def version() -> str:
    from importlib.metadata import version as installed

    return installed("kokoro-onnx")


async def create_turn(kokoro: Any, text: str, voice: str) -> TurnTrace:
    """``Kokoro.create``: the whole text at once, audio when all of it is made."""
    trace = TurnTrace("kokoro_onnx_create", first_sentence_at=0.0)
    started = time.monotonic()
    audio, rate = await asyncio.to_thread(kokoro.create, text, voice=voice, lang=LANG)
    trace.done_at = time.monotonic() - started
    trace.chunks.append(Chunk(trace.done_at, len(audio) / rate, onset_s(np.asarray(audio), rate)))
    return trace


async def create_stream_turn(
    kokoro: Any, text: str, voice: str, *, starts_at: float | None = None
) -> TurnTrace:
    """``Kokoro.create_stream``: the whole text at once, audio batch by batch as it is made; times count
    from ``starts_at`` (monotonic; default now)."""
    trace = TurnTrace("kokoro_onnx_create_stream", first_sentence_at=0.0)
    started = time.monotonic() if starts_at is None else starts_at
    async for audio, rate in kokoro.create_stream(text, voice=voice, lang=LANG):
        at = time.monotonic() - started
        trace.segments.append(at)
        trace.chunks.append(Chunk(at, len(audio) / rate, onset_s(np.asarray(audio), rate)))
    trace.done_at = time.monotonic() - started
    return trace
