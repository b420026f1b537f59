"""Engine micro-benchmark: ONNX Runtime session options vs ``kokoro-onnx`` on the same model, voice, phonemes.

Configurations are interleaved round-robin within each repetition, so background load hits all of them alike.
Run: ``python -m koe_bench.engine [--repeats N] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
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
from koe.types import SAMPLE_RATE
from koe_bench.peer import load_kokoro_onnx
from koe_bench.soak import rss_bytes
from koe_bench.stats import fit_line

SENTENCES = {
    "10 words": "The quick brown fox jumps over the lazy dog today.",
    "25 words": (
        "When the meeting ends, please send the summary to everyone on the team, and remind them that the "
        "next review is on Thursday afternoon."
    ),
}
VOICE = "af_heart"
THREADS = (1, 2)
OPTIMIZATION = ("basic", "extended", "all")


@dataclass
class Result:
    config: str
    sentence: str
    audio_s: float
    median_s: float
    rtf: float
    runs: int


@dataclass
class ScalingPoint:
    tokens: int
    audio_s: float
    median_s: float
    rtf: float
    runs: int


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> dict[str, float | None]:
    """Resident memory of this process now (Linux's /proc; None elsewhere) and at its peak, in MB."""
    try:
        now: float | None = rss_bytes() / 2**20
    except OSError:
        now = None
    return {"now": now, "peak": peak_rss_mb()}


def _kokoro_onnx(model: bytes, voices: VoiceBank, workdir: Path) -> Callable[[str], np.ndarray]:
    """kokoro-onnx's own session and code path, on the same int8 model and voice tables."""
    kokoro = load_kokoro_onnx(model, voices, workdir)

    def synthesize(phonemes: str) -> np.ndarray:
        audio, _rate = kokoro.create(phonemes, voice=VOICE, is_phonemes=True, trim=False)
        return np.asarray(audio)

    return synthesize


def interleave(
    candidates: dict[str, Callable[[str], np.ndarray]], inputs: dict[str, str], repeats: int
) -> tuple[dict[tuple[str, str], list[float]], dict[str, float]]:
    """Time every candidate on every input, ``repeats`` rounds, round-robin (after one warm-up each).

    Returns:
        seconds per ``(candidate, input label)``, and each input's audio length in seconds.
    """
    first = next(iter(inputs.values()))
    for synthesize in candidates.values():  # warm-up: first runs pay allocation costs
        synthesize(first)
    timings: dict[tuple[str, str], list[float]] = {}
    lengths: dict[str, float] = {}
    for _ in range(repeats):
        for label, ps in inputs.items():
            for name, synthesize in candidates.items():
                gc.collect()
                t0 = time.perf_counter()
                audio = synthesize(ps)
                timings.setdefault((name, label), []).append(time.perf_counter() - t0)
                lengths[label] = len(audio) / SAMPLE_RATE
    return timings, lengths


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
        points = [
            ScalingPoint(
                int(label),
                lengths[label],
                statistics.median(timings[(name, label)]),
                statistics.median(timings[(name, label)]) / lengths[label],
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

    candidates: dict[str, Callable[[str], np.ndarray]] = {}
    load_s: dict[str, float] = {}
    for threads in THREADS:
        for level in OPTIMIZATION:
            t0 = time.perf_counter()
            engine = OnnxEngine(model, OnnxOptions(threads=threads, graph_optimization=level))
            load_s[f"koe threads={threads} opt={level}"] = time.perf_counter() - t0

            def synthesize(ps: str, engine: OnnxEngine = engine) -> np.ndarray:
                return engine.synthesize(SynthesisRequest(ps, style))

            candidates[f"koe threads={threads} opt={level}"] = synthesize
    with tempfile.TemporaryDirectory() as workdir:
        t0 = time.perf_counter()
        candidates["kokoro-onnx 0.6.1 create()"] = _kokoro_onnx(model, voices, Path(workdir))
        load_s["kokoro-onnx 0.6.1 create()"] = time.perf_counter() - t0
        timings, lengths = interleave(candidates, phonemes, repeats)
    results = [
        Result(
            name,
            label,
            lengths[label],
            statistics.median(runs),
            statistics.median(runs) / lengths[label],
            len(runs),
        )
        for (name, label), runs in timings.items()
    ]
    return {
        "model_join_and_hash_s": join_s,
        "session_load_s": load_s,
        "peak_rss_mb": peak_rss_mb(),
        "results": [asdict(r) for r in results],
    }


def _print(report: dict[str, object]) -> None:
    from rich.console import Console
    from rich.table import Table

    results = report["results"]
    assert isinstance(results, list)
    table = Table("configuration", "sentence", "audio s", "median s", "RTF")
    for row in sorted(results, key=lambda r: (r["sentence"], r["rtf"])):
        table.add_row(
            row["config"],
            row["sentence"],
            f"{row['audio_s']:.2f}",
            f"{row['median_s']:.3f}",
            f"{row['rtf']:.3f}",
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
