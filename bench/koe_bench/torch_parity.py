"""The torch engine with weights derived from the int8 model against the ONNX engine: stages, ASR, batching.

Run: ``python -m koe_bench.torch_parity [--json docs/benchmarks/torch_parity.json]`` (after
``koe install --engine torch --weights derived``). On the CPU, 2 threads:

- stage by stage (:func:`koe.conversion.parity.compare_stages`): every voice × sentence × speed below;
- ASR (faster-whisper tiny.en): the held-out sentences spoken by each engine, word error rate;
- batching: the sentences in one ``synthesize_batch`` against each alone (log-mel distance, level), and
  the wall time of both ways (CPU: batching is for GPUs, here it only shows the cost of padding).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from koe.conversion.install import install
from koe.conversion.parity import TOLERANCES, compare_stages, exceeded
from koe.conversion.taps import Taps
from koe.engine.assets import packaged_model_bytes
from koe.engine.base import SynthesisRequest
from koe.engine.quality import compare
from koe.engine.registry import EngineOptions
from koe.engine.torch import TorchEngine, TorchOptions
from koe.pipeline.speech import Speech, SpeechOptions
from koe_bench.asr import Transcriber, word_error_rate

VOICES = ("af_heart", "am_michael", "bf_emma", "bm_george", "af_sky")
SENTENCES = (
    "Please call Stella and ask her to bring these things.",
    "Hold on, I will check the schedule for you!",
)
SPEEDS = (1.0, 1.2)
HELD_OUT = (
    "The train to Boston leaves at nine fifteen from platform four.",
    "Could you send the report to the whole team by Thursday?",
    "My sister bought a green umbrella before the storm arrived.",
    "We should plant the tomatoes after the last frost in April.",
    "He asked whether the library stays open late on Fridays.",
    "Turn left at the bakery and the museum is across the street.",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    onnx = Speech.load(SpeechOptions(EngineOptions(threads=2), voices=VOICES, warmup=False))
    weights = install("derived")
    torch_speech = onnx.with_engine(TorchEngine.load(weights, TorchOptions("cpu", max_batch=16, threads=2)))
    model = torch_speech.engine._model  # type: ignore[attr-defined]
    taps = Taps(packaged_model_bytes(), threads=2)
    stages: list[dict[str, Any]] = []
    for voice in VOICES:
        for text in SENTENCES:
            for speed in SPEEDS:
                (phonemes,) = onnx.phonemize(text)
                errors = compare_stages(
                    model, taps, SynthesisRequest(phonemes, onnx.voices.resolve(voice), speed)
                )
                measured = {name: getattr(errors, name) for name in errors.__dataclass_fields__}
                stages.append({"voice": voice, "text": text, "speed": speed, **measured})
                print(voice, speed, exceeded(errors) or "within tolerances", flush=True)
    transcribe = Transcriber()
    asr = {
        name: [word_error_rate(text, transcribe(speech.synthesize(text))) for text in HELD_OUT]
        for name, speech in (("onnx", onnx), ("torch", torch_speech))
    }
    requests = [
        SynthesisRequest(onnx.phonemize(text)[0], onnx.voices.resolve(VOICES[i % len(VOICES)]))
        for i, text in enumerate(HELD_OUT)
    ]
    started = time.perf_counter()
    alone = [torch_speech.engine.synthesize_batch([r])[0] for r in requests]
    alone_s = time.perf_counter() - started
    started = time.perf_counter()
    together = torch_speech.engine.synthesize_batch(requests)
    together_s = time.perf_counter() - started
    batch = [
        {"distance_db": c.distance_db, "level_db": c.level_db}
        for c in (compare(t.audio, a.audio) for t, a in zip(together, alone, strict=True))
    ]
    fields = list(TOLERANCES.__dataclass_fields__)
    result = {
        "weights": torch_speech.engine.weights,  # type: ignore[attr-defined]
        "tolerances": {name: getattr(TOLERANCES, name) for name in fields},
        "stages_worst": {name: max(row[name] for row in stages) for name in fields},
        "stages_median": {name: float(np.median([row[name] for row in stages])) for name in fields},
        "stages": stages,
        "asr_wer": {name: {"mean": float(np.mean(v)), "per_sentence": v} for name, v in asr.items()},
        "held_out": list(HELD_OUT),
        "batch_vs_alone": {
            "members": batch,
            "alone_s": alone_s,
            "together_s": together_s,
            "audio_s": sum(u.audio.size for u in together) / 24_000,
        },
        "measured_at": time.strftime("%Y-%m-%d"),
        "machine": "2 vCPU, torch CPU, 2 threads",
    }
    print(json.dumps({k: result[k] for k in ("stages_worst", "asr_wer", "batch_vs_alone")}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
