"""Engine micro-benchmark: ONNX Runtime session options vs ``kokoro-onnx`` on the same model, voice, phonemes.

Configurations are interleaved round-robin within each repetition, so background load hits all of them alike.
Each run is timed twice: wall time, and this process's CPU time (every thread's, user and system), which is
what a listener costs on a shared server; both engines run in this process, so CPU time is theirs alone.
Run: ``python -m koe_bench.engine [--repeats N] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from koe.engine.assets import install_voices, packaged_model_bytes
from koe.engine.base import SynthesisRequest
from koe.engine.onnx.engine import OnnxEngine, OnnxOptions
from koe.engine.vocab import count_tokens
from koe.engine.voices import ENGLISH_VOICES, VoiceBank
from koe.g2p.misaki import MisakiG2P
from koe.settings import Settings
from koe.types import SAMPLE_RATE
from koe_bench.peer import load_kokoro_onnx
from koe_bench.stats import fit_line
from koe_bench.usage import process_peak_mb, status_mb

#: The text CPU cost is compared on (issue 33's "40-word text"): one call, long enough that the per-call
#: cost is a small share, as in a streamed answer's later segments.
CPU_TEXT = (
    "When the meeting ends, please send the summary to everyone on the team, and remind them that the next "
    "review is on Thursday afternoon. Bring the updated budget figures, the list of open questions, and any "
    "notes from your calls."
)
SENTENCES = {
    "10 words": "The quick brown fox jumps over the lazy dog today.",
    "25 words": (
        "When the meeting ends, please send the summary to everyone on the team, and remind them that the "
        "next review is on Thursday afternoon."
    ),
    "40 words": CPU_TEXT,
}
VOICE = "af_heart"
THREADS = (1, 2)
OPTIMIZATION = ("basic", "extended", "all")
SPIN = (True, False)
#: Waited after each run before its CPU time is read: ONNX Runtime's threads may spin on after a run, and
#: that CPU is the run's, not the next candidate's.
SETTLE_S = 0.05


@dataclass
class Result:
    config: str
    sentence: str
    audio_s: float
    median_s: float
    rtf: float
    runs: int
    cpu_s: float  # median CPU seconds per run
    audio_per_cpu_s: float


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed run: wall seconds, and this process's CPU seconds (every thread, user and system) from
    its start until :data:`SETTLE_S` after its end."""

    wall_s: float
    cpu_s: float


@dataclass
class CpuCost:
    """One candidate's CPU per call on one text (medians over ``runs``)."""

    audio_s: float
    wall_s: float
    cpu_s: float
    audio_per_cpu_s: float
    runs: int


@dataclass
class ScalingPoint:
    tokens: int
    audio_s: float
    median_s: float
    rtf: float
    runs: int


def rss_mb() -> dict[str, float | None]:
    """Resident memory of this process now (Linux's /proc; None elsewhere) and at its peak, in MB."""
    return {"now": status_mb("VmRSS"), "peak": process_peak_mb()}


def _kokoro_onnx(model: bytes, voices: VoiceBank, workdir: Path) -> Callable[[str], np.ndarray]:
    """kokoro-onnx's own session and code path, on the same int8 model and voice tables."""
    kokoro = load_kokoro_onnx(model, voices, workdir)

    def synthesize(phonemes: str) -> np.ndarray:
        audio, _rate = kokoro.create(phonemes, voice=VOICE, is_phonemes=True, trim=False)
        return np.asarray(audio)

    return synthesize


def interleave(
    candidates: dict[str, Callable[[str], np.ndarray]], inputs: dict[str, str], repeats: int
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, float]]:
    """Time every candidate on every input, ``repeats`` rounds, round-robin (after one warm-up each).

    Returns:
        the runs per ``(candidate, input label)``, and each input's audio length in seconds.
    """
    first = next(iter(inputs.values()))
    for synthesize in candidates.values():  # warm-up: first runs pay allocation costs
        synthesize(first)
    timings: dict[tuple[str, str], list[Sample]] = {}
    lengths: dict[str, float] = {}
    for _ in range(repeats):
        for label, ps in inputs.items():
            for name, synthesize in candidates.items():
                sample, audio = timed(synthesize, ps)
                timings.setdefault((name, label), []).append(sample)
                lengths[label] = len(audio) / SAMPLE_RATE
    return timings, lengths


def timed(synthesize: Callable[[str], np.ndarray], phonemes: str) -> tuple[Sample, np.ndarray]:
    """One run of ``synthesize`` on ``phonemes``, timed on the wall and in CPU, and its audio."""
    gc.collect()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    audio = synthesize(phonemes)
    wall_s = time.perf_counter() - t0
    time.sleep(SETTLE_S)
    return Sample(wall_s, time.process_time() - cpu0), audio


def cpu_cost(
    candidates: dict[str, Callable[[str], np.ndarray]], phonemes: str, repeats: int
) -> dict[str, CpuCost]:
    """Each candidate's CPU seconds per call on ``phonemes`` and the audio-seconds each CPU-second makes,
    interleaved round-robin as :func:`interleave` runs them."""
    timings, lengths = interleave(candidates, {"text": phonemes}, repeats)
    costs: dict[str, CpuCost] = {}
    for name in candidates:
        runs = timings[(name, "text")]
        cpu_s = statistics.median(run.cpu_s for run in runs)
        costs[name] = CpuCost(
            lengths["text"],
            statistics.median(run.wall_s for run in runs),
            cpu_s,
            lengths["text"] / cpu_s,
            len(runs),
        )
    return costs


def token_scaling(
    candidates: dict[str, Callable[[str], np.ndarray]], phonemes: str, sizes: Sequence[int], repeats: int
) -> dict[str, object]:
    """Synthesis time against phoneme-token count for each candidate: points, a fitted line, and RTF.

    Inputs are prefixes of ``phonemes`` cut at a space near each of ``sizes`` tokens, so every length
    is real speech with the same voice and prosody, not padding.
    """
    inputs = {str(count_tokens(p)): p for p in (_prefix(phonemes, size) for size in sizes)}
    timings, lengths = interleave(candidates, inputs, repeats)
    report: dict[str, object] = {}
    for name in candidates:
        medians = {label: statistics.median(run.wall_s for run in timings[(name, label)]) for label in inputs}
        points = [
            ScalingPoint(
                int(label),
                lengths[label],
                medians[label],
                medians[label] / lengths[label],
                len(timings[(name, label)]),
            )
            for label in inputs
        ]
        fit = fit_line([p.tokens for p in points], [p.median_s for p in points])
        report[name] = {
            "intercept_s": fit.intercept,
            "slope_ms_per_token": fit.slope * 1000,
            "r2": fit.r2,
            "points": [asdict(p) for p in points],
        }
    return report


def _prefix(phonemes: str, tokens: int) -> str:
    """The longest prefix of ``phonemes`` ending at a space that has at most ``tokens`` tokens."""
    if count_tokens(phonemes) <= tokens:
        return phonemes
    cut = phonemes.rfind(" ", 0, tokens + 1)
    return phonemes[: cut if cut > 0 else tokens].strip()


def run(repeats: int = 5) -> dict[str, object]:
    started = time.perf_counter()
    model = packaged_model_bytes()
    join_s = time.perf_counter() - started
    voices = VoiceBank.load(install_voices(list(ENGLISH_VOICES)), ENGLISH_VOICES)
    g2p = MisakiG2P()
    phonemes = {label: g2p.phonemize(text) for label, text in SENTENCES.items()}
    style = voices.resolve(VOICE)

    served = Settings.from_env().layout
    candidates: dict[str, Callable[[str], np.ndarray]] = {}
    load_s: dict[str, float] = {}
    for threads in THREADS:
        for level in OPTIMIZATION:
            for spin in SPIN:
                name = f"koe threads={threads} opt={level} spin={int(spin)}"
                if (threads, level, spin) == (served.threads, OnnxOptions().graph_optimization, served.spin):
                    name += " (as served)"
                t0 = time.perf_counter()
                # only synthesize() is timed: the single graph, without the stage cut's sessions
                options = OnnxOptions(threads=threads, graph_optimization=level, spin=spin, streaming=False)
                engine = OnnxEngine(model, options)
                load_s[name] = time.perf_counter() - t0

                def synthesize(ps: str, engine: OnnxEngine = engine) -> np.ndarray:
                    return engine.synthesize(SynthesisRequest(ps, style))

                candidates[name] = synthesize
    with tempfile.TemporaryDirectory() as workdir:
        t0 = time.perf_counter()
        candidates["kokoro-onnx 0.6.1 create()"] = _kokoro_onnx(model, voices, Path(workdir))
        load_s["kokoro-onnx 0.6.1 create()"] = time.perf_counter() - t0
        timings, lengths = interleave(candidates, phonemes, repeats)
    results = []
    for (name, label), runs in timings.items():
        wall_s = statistics.median(run.wall_s for run in runs)
        cpu_s = statistics.median(run.cpu_s for run in runs)
        audio_s = lengths[label]
        results.append(
            Result(name, label, audio_s, wall_s, wall_s / audio_s, len(runs), cpu_s, audio_s / cpu_s)
        )
    return {
        "model_join_and_hash_s": join_s,
        "session_load_s": load_s,
        "peak_rss_mb": process_peak_mb(),
        "results": [asdict(r) for r in results],
    }


def _print(report: dict[str, object]) -> None:
    from rich.console import Console
    from rich.table import Table

    results = report["results"]
    assert isinstance(results, list)
    table = Table("configuration", "sentence", "audio s", "median s", "RTF", "CPU s", "audio s per CPU s")
    for row in sorted(results, key=lambda r: (r["sentence"], r["rtf"])):
        table.add_row(
            row["config"],
            row["sentence"],
            f"{row['audio_s']:.2f}",
            f"{row['median_s']:.3f}",
            f"{row['rtf']:.3f}",
            f"{row['cpu_s']:.3f}",
            f"{row['audio_per_cpu_s']:.2f}",
        )
    Console().print(table)
    Console().print(
        f"model join+hash {report['model_join_and_hash_s']:.2f} s, peak RSS {report['peak_rss_mb']:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = run(args.repeats)
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
