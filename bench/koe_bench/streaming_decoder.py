"""First audio, gaps and total time for 5-, 10-, 25- and 40-word segments: whole vs windowed decoding.

Run: ``python -m koe_bench.streaming_decoder [--voice af_heart] [--repeats 3] [--json out.json]``. One
process, one engine (2 threads), each segment decoded three ways, interleaved, ``--repeats`` times (medians
reported):

- ``whole``: ``engine.synthesize`` — the first sample exists when the segment is done;
- ``timed``: the default ``engine.stream`` — word timings right after stage A, then the whole decode;
- ``windowed``: ``stream(..., windowed=True)`` with adaptive windows, played by a simulated real-time
  listener that starts at the first chunk (segments under ``MIN_WINDOWED_FRAMES`` decode whole).

"Gap-free start" is the earliest moment playback could start and never run dry afterwards; "gaps" counts
the stalls a listener starting at the first chunk would hear. Quality is measured against the whole decode
(log-mel distance, level, worst mel band) and, for joins, against a whole decode with the same frozen
statistics (see docs/engine.md, "Streaming decoder").
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

import numpy as np

from koe.engine.base import AudioChunk, SynthesisRequest
from koe.engine.onnx.decoder import StreamingDecoder
from koe.engine.onnx.engine import OnnxEngine
from koe.engine.onnx.moments import quiet_fraction
from koe.engine.quality import compare
from koe.engine.registry import EngineOptions
from koe.engine.timing import SegmentTiming
from koe.engine.vocab import tokenize
from koe.pipeline.listener import PlaybackClock
from koe.pipeline.speech import Speech, SpeechOptions
from koe.types import SAMPLE_RATE

SEGMENTS = {
    5: "Thanks, that sounds great.",
    10: "The package should arrive at your front door by Friday.",
    25: (
        "Before you leave the office tonight, please check that every window is closed, the printer is "
        "switched off, and the spare keys are back in the drawer."
    ),
    40: (
        "When we reviewed the results from the spring survey, we noticed that most customers were happy "
        "with the delivery times, but many of them asked for clearer instructions, a simpler returns "
        "process, and a phone line that answers before the third ring."
    ),
}


@dataclass
class Row:
    words: int
    audio_s: float
    whole_s: float
    timing_s: float  # default stream: SegmentTiming after stage A
    first_chunk_s: float  # windowed: the leading silence
    first_speech_s: float  # windowed: the first decoded window
    gap_free_start_s: float
    gaps: int
    windowed_total_s: float
    overhead: float  # windowed total / whole − 1
    windows: int
    distance_db: float
    level_db: float
    balance_db: float
    seam_db: float
    elsewhere_db: float


def _play(arrivals: list[tuple[float, int]]) -> tuple[float, int]:
    """Earliest gap-free start, and stalls for a listener starting at the first chunk."""
    played = 0
    gap_free = 0.0
    for arrival, samples in arrivals:
        gap_free = max(gap_free, arrival - played / SAMPLE_RATE)
        played += samples
    clock = arrivals[0][0]  # when the listener runs dry next
    gaps = 0
    for arrival, samples in arrivals:
        if arrival > clock + 1e-3:
            gaps += 1
            clock = arrival
        clock += samples / SAMPLE_RATE
    return gap_free, gaps


def measure(speech: Speech, decoder: StreamingDecoder, voice: str, words: int, text: str) -> Row:
    (phonemes,) = speech.phonemize(text, speech.voices.lang_of(voice))
    style = speech.voices.resolve(voice)
    request = SynthesisRequest(phonemes, style)

    started = time.perf_counter()
    whole = speech.engine.synthesize(request)
    whole_s = time.perf_counter() - started

    started = time.perf_counter()
    timed = decoder.stream(request)
    first = next(timed)
    timing_s = time.perf_counter() - started
    assert isinstance(first, SegmentTiming)
    for _ in timed:
        pass

    started = time.perf_counter()
    arrivals: list[tuple[float, int]] = []
    chunks: list[AudioChunk] = []
    listener = PlaybackClock()  # plays each chunk in real time from its arrival
    segment = decoder.stream(request, windowed=True, buffered_s=listener.ahead_s)
    for event in segment:
        if isinstance(event, AudioChunk):
            arrivals.append((time.perf_counter() - started, event.audio.size))
            listener.delivered(event.audio.size / SAMPLE_RATE)
            chunks.append(event)
    windowed_total_s = time.perf_counter() - started
    windowed = np.concatenate([chunk.audio for chunk in chunks])
    gap_free, gaps = _play(arrivals)

    ids = tokenize(phonemes)
    row = style[len(ids) - 1]
    front = decoder.stages.run_front(ids, row, 1.0)
    moments = decoder.calibration.lookup(style)
    assert moments is not None
    statistics = moments.statistics(decoder.stages.norms, quiet_fraction(front.energy))
    frozen = decoder.stages.decode_window(front, row, statistics, 0, front.frames)
    quality = compare(windowed, whole)
    seams = compare(windowed, frozen, [chunk.start for chunk in chunks[1:]])
    return Row(
        words=words,
        audio_s=whole.size / SAMPLE_RATE,
        whole_s=whole_s,
        timing_s=timing_s,
        first_chunk_s=arrivals[0][0],
        first_speech_s=arrivals[1][0] if len(arrivals) > 1 else arrivals[0][0],
        gap_free_start_s=gap_free,
        gaps=gaps,
        windowed_total_s=windowed_total_s,
        overhead=windowed_total_s / whole_s - 1,
        windows=segment.windows,
        distance_db=quality.distance_db,
        level_db=quality.level_db,
        balance_db=quality.balance_db,
        seam_db=seams.seam_db,
        elsewhere_db=seams.elsewhere_db,
    )


def _median(rows: list[Row]) -> Row:
    """Each field's median over repeats of one segment (quality fields are identical: decoding is
    deterministic)."""
    fields = [asdict(row) for row in rows]
    return Row(**{key: type(fields[0][key])(np.median([f[key] for f in fields])) for key in fields[0]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    speech = Speech.load(SpeechOptions(EngineOptions(threads=args.threads), voices=(args.voice,)))
    engine = speech.engine
    assert isinstance(engine, OnnxEngine)
    if engine.streaming is None:
        raise SystemExit("the stage cut did not verify on this model: nothing to benchmark")
    decoder = engine.streaming
    decoder.calibration.calibrate(speech.voices.resolve(args.voice))
    cost = decoder.cost
    print(f"cost model: {cost.fixed_s * 1e3:.0f} ms + {cost.per_unit_s * 1e3:.1f} ms/frame")
    runs = [
        [measure(speech, decoder, args.voice, words, text) for words, text in SEGMENTS.items()]
        for _ in range(args.repeats)
    ]
    rows = [_median(list(same)) for same in zip(*runs, strict=True)]
    header = (
        "words audio_s whole_s timing_s 1st_chunk 1st_speech gapfree gaps win_total overhead windows "
        "dist_dB level_dB balance_dB seam_dB else_dB"
    )
    print(header)
    for row in rows:
        cells = [f"{value:.3g}" if isinstance(value, float) else str(value) for value in asdict(row).values()]
        print(" ".join(cells))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([asdict(row) for row in rows], out, indent=2)


if __name__ == "__main__":
    main()
