"""Text work per second of speech: how much of one CPU core a speaking session's segmenting, normalizing and
G2P cost, per language.

A GPU does the engine's passes; the host still cuts and normalizes every session's text (on the event loop)
and turns each segment into phonemes (in a worker thread), in Python. That work decides how many CPU cores
a GPU host needs per session, and — since the GIL and, for English, spaCy's one pipeline lock
(:mod:`koe.g2p.misaki`) let one process's G2P use about one core however many threads run it — how many
concurrently speaking sessions one server process's text side can feed at all. Per language: the bench's
streamed answers fed to the language's segmenter token by token as an agent writes them, then each segment
through :meth:`koe.pipeline.speech.Speech.phonemize_words` (what a segment's preparation runs), both timed
in CPU seconds of this one thread; the audio they make from the engine's own durations (its text pass only,
so the scenario stays cheap). The work runs in this one thread and starts none, so its thread's CPU time is
all of it, and other threads of the process (the engine's pool between runs) are left out.
``audio_s_per_cpu_s`` is how many sessions speaking without pause one core's text work keeps up with, and
``cores_per_session`` its inverse.

Run alone, as the other small scenarios are: ``python -m koe_bench.textwork [--json FILE]`` (seconds,
most of them loading the model and building the G2P);
``docs/benchmarks/text_work.json`` is its committed result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from koe.agent.replay import tokenize
from koe.engine.base import SynthesisRequest
from koe.engine.timing import SegmentTiming
from koe.errors import AssetError, ConfigError
from koe.pipeline.speech import Speech, SpeechOptions
from koe.text.languages.lookup import segmenter_for
from koe.text.segment import Segment
from koe.types import SAMPLE_RATE
from koe_bench import config, languages
from koe_bench.runstamp import report_head, stamp_end

SCHEMA = "koe-bench-text-work/1"
COMMAND = "python -m koe_bench.textwork"
#: Per language: a voice of it and the bench's streamed answers in it (the agent answer, and the languages
#: scenario's answers).
TEXTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "en-us": (config.VOICE, (config.ANSWER, languages.ANSWERS["en-us"][1])),
    "es": (languages.ANSWERS["es"][0], (languages.ANSWERS["es"][1],)),
    "ja": (languages.ANSWERS["ja"][0], (languages.ANSWERS["ja"][1],)),
}
#: Timed passes over each language's texts after one untimed pass (which builds the G2P and warms it); the
#: median is reported.
REPEATS = 5
#: Significant digits of the reported figures: enough that the ratios can be recomputed from the seconds.
DIGITS = 4


@dataclass(frozen=True, slots=True)
class TextWork:
    """One language's text work over its texts, and the speech it yields.

    Attributes:
        voice: the voice whose durations measured the audio.
        segments: segments cut.
        chars: characters of the texts.
        audio_s: seconds of audio the segments make (the engine's durations, padding included).
        segment_cpu_s: CPU seconds of cutting and normalizing (median pass).
        g2p_cpu_s: CPU seconds of G2P (median pass).
        audio_s_per_cpu_s: audio seconds per CPU second of both: concurrently speaking sessions one core's
            text work keeps up with.
        g2p_audio_s_per_cpu_s: the same for G2P alone (the part on the worker threads).
        cores_per_session: the fraction of a core one speaking session's text work keeps busy.
        g2p_ms_per_segment: G2P's CPU milliseconds per segment, the mean: what a segment's preparation adds
            before it can board an engine call (the first one's is part of first audio).
    """

    voice: str
    segments: int
    chars: int
    audio_s: float
    segment_cpu_s: float
    g2p_cpu_s: float
    audio_s_per_cpu_s: float
    g2p_audio_s_per_cpu_s: float
    cores_per_session: float
    g2p_ms_per_segment: float


def measure(speech: Speech, repeats: int = REPEATS, langs: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Each of ``langs`` (default: every language of :data:`TEXTS`) measured ``repeats`` times; the
    scenario's figures, JSON-ready. A language whose G2P is not installed is left out, named under
    ``skipped`` with the reason."""
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for lang in langs if langs is not None else tuple(TEXTS):
        voice, texts = TEXTS[lang]
        try:
            speech.g2p.check(lang)
        except (AssetError, ConfigError) as exc:  # its G2P is not installed: say so, measure the others
            skipped[lang] = str(exc)
            continue
        results[lang] = asdict(_language(speech, lang, voice, texts, repeats))
    return {"languages": results, "skipped": skipped}


def _language(speech: Speech, lang: str, voice: str, texts: tuple[str, ...], repeats: int) -> TextWork:
    segmented: list[float] = []
    phonemized: list[float] = []
    for round_ in range(repeats + 1):  # the first round builds and warms the G2P: untimed
        started = time.thread_time()
        segments = _segments(lang, texts)
        cut = time.thread_time()
        phonemes = [
            piece.phonemes
            for segment in segments
            for piece in speech.phonemize_words(segment.spoken_text, lang)
            if piece.phonemes
        ]
        read = time.thread_time()
        if round_:
            segmented.append(cut - started)
            phonemized.append(read - cut)
    style = speech.voices.resolve(voice)
    audio_s = _rounded(sum(_seconds(speech, SynthesisRequest(p, style)) for p in phonemes))
    segment_s, g2p_s = _rounded(statistics.median(segmented)), _rounded(statistics.median(phonemized))
    return TextWork(
        voice=voice,
        segments=len(segments),
        chars=sum(len(text) for text in texts),
        audio_s=audio_s,
        segment_cpu_s=segment_s,
        g2p_cpu_s=g2p_s,
        audio_s_per_cpu_s=_rounded(audio_s / (segment_s + g2p_s)),
        g2p_audio_s_per_cpu_s=_rounded(audio_s / g2p_s),
        cores_per_session=_rounded((segment_s + g2p_s) / audio_s),
        g2p_ms_per_segment=_rounded(g2p_s * 1000 / len(segments)),
    )


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def _segments(lang: str, texts: tuple[str, ...]) -> list[Segment]:
    """``texts`` cut as a stream cuts them: fed a token at a time, then flushed."""
    cut: list[Segment] = []
    for text in texts:
        segmenter = segmenter_for(lang)
        for token in tokenize(text):
            cut += segmenter.feed(token)
        cut += segmenter.flush()
    return cut


def _seconds(speech: Speech, request: SynthesisRequest) -> float:
    """Seconds of audio ``request`` makes: the engine's durations where it gives timings (its text pass
    only), else its audio."""
    first = next(speech.engine.stream(request), None)
    if isinstance(first, SegmentTiming):
        return first.samples / SAMPLE_RATE
    return speech.engine.synthesize(request).size / SAMPLE_RATE


def run_alone(speech: Speech, repeats: int = REPEATS) -> dict[str, Any]:
    """The result file: the run's head (:func:`koe_bench.runstamp.report_head`), then :func:`measure`."""
    started = time.monotonic()
    report = report_head(SCHEMA, COMMAND, {"repeats": repeats, "engine": speech.engine.description})
    report |= measure(speech, repeats)
    stamp_end(report, started)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    report = run_alone(Speech.load(SpeechOptions(warmup=False)), args.repeats)
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
