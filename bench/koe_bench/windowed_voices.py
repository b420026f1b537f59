"""Windowed decoding's statistics, voice by voice: how far each voice's estimate is from the whole decode.

Run: ``python -m koe_bench.windowed_voices [--voices af_heart,am_michael] [--json out.json]`` (all 28
English voices by default, ~10 s each here). Per voice: calibrate (cached), then for held-out sentences at
speeds 0.8, 1.0 and 1.3 decode the whole segment twice — with its own statistics (the reference, identical
to the single graph) and with the estimate windowed decoding uses — and compare (log-mel distance, level,
worst mel band; ``koe.engine.quality``). Windows add nothing measurable on top (the quality gate's joins
test), so this isolates what decides the default: the statistics.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import numpy as np

from koe.engine.onnx.engine import OnnxEngine
from koe.engine.onnx.moments import quiet_fraction
from koe.engine.quality import compare
from koe.engine.registry import EngineOptions
from koe.engine.vocab import tokenize
from koe.engine.voices import ENGLISH_VOICES
from koe.pipeline.speech import Speech, SpeechOptions

HELD_OUT = (
    "The museum opens at noon, so we can sleep late.",
    "I'm sorry, but the train to Boston was cancelled this morning because of the storm.",
)
SPEEDS = (0.8, 1.0, 1.3)
TAKE_TO_TAKE_DB = 3.0


@dataclass
class VoiceRow:
    voice: str
    distance_db_median: float
    distance_db_max: float
    level_db_max_abs: float
    balance_db_median: float
    balance_db_max: float


def measure(speech: Speech, voice: str) -> VoiceRow:
    engine = speech.engine
    assert isinstance(engine, OnnxEngine) and engine.streaming is not None
    stages = engine.streaming.stages
    style = speech.voices.resolve(voice)
    moments = engine.streaming.calibration.calibrate(style)
    results = []
    for text in HELD_OUT:
        (phonemes,) = speech.phonemize(text, speech.voices.lang_of(voice))
        ids = tokenize(phonemes)
        row = style[len(ids) - 1]
        for speed in SPEEDS:
            front = stages.run_front(ids, row, speed)
            whole, _own = stages.decode(front, row)
            statistics = moments.statistics(stages.norms, quiet_fraction(front.energy))
            estimated = stages.decode_window(front, row, statistics, 0, front.frames)
            results.append(compare(estimated, whole))
    distance = [r.distance_db for r in results]
    balance = [r.balance_db for r in results]
    return VoiceRow(
        voice=voice,
        distance_db_median=float(np.median(distance)),
        distance_db_max=max(distance),
        level_db_max_abs=max(abs(r.level_db) for r in results),
        balance_db_median=float(np.median(balance)),
        balance_db_max=max(balance),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voices", default=",".join(ENGLISH_VOICES))
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    voices = tuple(args.voices.split(","))
    speech = Speech.load(SpeechOptions(EngineOptions(threads=2), voices=voices))
    rows = []
    print("voice dist_med dist_max |level|_max balance_med balance_max")
    for voice in voices:
        rows.append(measure(speech, voice))
        cells = [f"{value:.2f}" if isinstance(value, float) else value for value in asdict(rows[-1]).values()]
        print(" ".join(cells), flush=True)
    within = {
        "distance": sum(r.distance_db_max <= TAKE_TO_TAKE_DB for r in rows),
        "level": sum(r.level_db_max_abs <= TAKE_TO_TAKE_DB for r in rows),
        "balance": sum(r.balance_db_max <= TAKE_TO_TAKE_DB for r in rows),
    }
    print(f"voices within {TAKE_TO_TAKE_DB} dB on every sentence and speed, of {len(rows)}: {within}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": [asdict(r) for r in rows], "within": within}, out, indent=2)


if __name__ == "__main__":
    main()
