"""Streamed answers in Japanese and Spanish: is first audio as prompt as in English?

The same answer (the bench's directions to the museum, translated) is streamed token by token by the
simulated LLM in English, Japanese and Spanish, through the same server: koe appends each token and
flushes (audio plays as it arrives), batch waits for the whole answer and asks for one file. "First
sentence → first audio" is measured from the token that completes the first sentence (``。`` in Japanese).
The audio each language makes per character is reported too: it is what the segmenter's per-language
lengths are scaled by (:data:`koe.text.languages.lookup.CHARS_PER_CHAR`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from koe.agent.replay import tokenize
from koe.pipeline.speech import Speech, SpeechOptions
from koe_bench.config import BenchConfig
from koe_bench.runstamp import pace_fields, report_head, stamp_end
from koe_bench.stats import summarize_runs
from koe_bench.tables import seconds
from koe_bench.target import bench_settings, in_process_server
from koe_bench.turns import TurnTrace, batch_turn, koe_turn

SCHEMA = "koe-bench-languages/1"
JSON_NAME = "languages.json"
#: Per language: the voice and the answer (the bench's English answer, its first two paragraphs).
ANSWERS: dict[str, tuple[str, str]] = {
    "en-us": (
        "af_heart",
        "Sure, here's how to get there. Take the Red Line north to Central Station, then switch to the "
        "Blue Line toward the airport; trains come every six minutes during the day.\n\n"
        "The ride takes about twenty-five minutes. Get off at Harbor Street, walk two blocks east past "
        "the bakery, and the museum is on your left, right across from the fountain.",
    ),
    "ja": (
        "jf_alpha",
        "はい、行き方をご説明します。赤線で北へ向かい、中央駅で空港行きの青線に乗り換えてください。"
        "日中は六分ごとに電車が来ます。\n\n"
        "乗車時間は約二十五分です。ハーバー通りで降りて、パン屋の前を東へ二ブロック歩くと、"
        "噴水の向かい側、左手に美術館があります。",
    ),
    "es": (
        "ef_dora",
        "Claro, así se llega. Toma la Línea Roja hacia el norte hasta la Estación Central y cambia a la "
        "Línea Azul en dirección al aeropuerto; los trenes pasan cada seis minutos durante el día.\n\n"
        "El trayecto dura unos veinticinco minutos. Bájate en la calle Harbor, camina dos cuadras hacia "
        "el este pasando la panadería, y el museo está a tu izquierda, justo enfrente de la fuente.",
    ),
}
#: Where a sentence ends, in any of the three languages.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")


def answer(lang: str, quick: bool) -> str:
    """The language's answer; quick runs take its first sentence."""
    text = ANSWERS[lang][1]
    end = _SENTENCE_END.search(text)
    return text[: end.end()] if quick and end is not None else text


def first_sentence_at(text: str, trace: TurnTrace) -> float | None:
    """When the token that completes the first sentence came (the turn's own split knows only ``.!?``)."""
    end = _SENTENCE_END.search(text)
    if end is None or not trace.tokens:
        return None
    written = 0
    for token, at in zip(tokenize(text), trace.tokens, strict=False):
        written += len(token)
        if written >= end.end():
            return at
    return None


async def measure(config: BenchConfig, url: str, step: Callable[[], None]) -> dict[str, Any]:
    """Every language's answer by koe and by batch, ``config.repeats`` rounds interleaved."""
    runs: dict[str, dict[str, list[TurnTrace]]] = {lang: {"koe": [], "batch": []} for lang in ANSWERS}
    for _ in range(config.repeats):
        for lang, (voice, _) in ANSWERS.items():
            text = answer(lang, config.quick)
            koe = await koe_turn(url, text, config.pace, voice)
            koe.first_sentence_at = first_sentence_at(text, koe)
            runs[lang]["koe"].append(koe)
            step()
            batch = await batch_turn(url, text, config.pace, voice)
            batch.first_sentence_at = first_sentence_at(text, batch)
            runs[lang]["batch"].append(batch)
            step()

    result: dict[str, Any] = {}
    for lang, strategies in runs.items():
        summaries = {
            name: summarize_runs([t.metrics() for t in traces]) for name, traces in strategies.items()
        }
        text = answer(lang, config.quick)
        audio_s = summaries["koe"]["audio_s"]["median"]
        result[lang] = {
            "voice": ANSWERS[lang][0],
            "answer_chars": len(text),
            "strategies": summaries,
            "batch_over_koe_first_audio": (
                summaries["batch"]["first_audio_s"]["median"] / summaries["koe"]["first_audio_s"]["median"]
            ),
            "audio_s_per_char": audio_s / len(text),
        }
    english = result["en-us"]["audio_s_per_char"]
    for entry in result.values():
        entry["english_chars_per_char"] = entry["audio_s_per_char"] / english
    return result


def table(result: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The scenario as a report table: title, columns, rows, notes (medians)."""
    columns = ("language", "voice", "koe first audio s", "after 1st sentence s", "batch first audio s",
               "batch / koe", "gaps", "audio s per char")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    for lang, entry in result.items():
        koe, batch = entry["strategies"]["koe"], entry["strategies"]["batch"]
        rows.append(
            (
                lang,
                entry["voice"],
                seconds(koe["first_audio_s"]),
                seconds(koe.get("first_audio_after_sentence_s")),
                seconds(batch["first_audio_s"]),
                f"{entry['batch_over_koe_first_audio']:.1f}×",
                f"{koe['gap_count']['median']:g}",
                f"{entry['audio_s_per_char']:.3f}",
            )
        )
    notes = [
        "audio per character over English's: "
        + ", ".join(f"{lang} {entry['english_chars_per_char']:.2f}" for lang, entry in result.items())
    ]
    return "7 · streamed answer per language: English, Japanese, Spanish (medians)", columns, rows, notes


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """This scenario alone (``koe bench --only languages``): a server in this process, the JSON report."""
    started = time.monotonic()
    settings = bench_settings()
    report = report_head(
        SCHEMA,
        command,
        {
            **pace_fields(config.pace),
            "repeats": config.repeats,
            "workers": settings.layout.workers,
            "threads_per_worker": settings.layout.threads,
        },
        quick=config.quick,
    )
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=False))
    with in_process_server(settings, speech) as url:
        report["languages"] = asyncio.run(measure(config, url, lambda: None))
    stamp_end(report, started)
    return report
