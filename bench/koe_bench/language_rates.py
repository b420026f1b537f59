"""How much speech a character is, per language, and what each language's G2P costs to build and run.

Run: ``python -m koe_bench.language_rates [--json docs/benchmarks/language_rates.json]`` (~5 minutes
here). Per language: the G2P's build time (a fresh registry, first use), then three everyday sentences by
two of its voices: seconds of audio per character of text, phoneme tokens per character, G2P time per
sentence. ``english_chars_per_char`` (audio per character over American English's) is what the segmenter
scales a language's segment lengths by (``koe.text.languages.lookup.CHARS_PER_CHAR``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from koe.engine.registry import EngineOptions
from koe.engine.vocab import count_tokens
from koe.engine.voices import VOICES
from koe.g2p.registry import G2PRegistry
from koe.pipeline.speech import Speech, SpeechOptions
from koe.text.languages.lookup import rules_for
from koe.types import SAMPLE_RATE

SENTENCES = {
    "en-us": (
        "The train leaves at noon, so we still have time for coffee.",
        "Could you send me the report before the meeting tomorrow?",
        "It rained all night, but the morning was bright and warm.",
    ),
    "en-gb": (
        "The train leaves at noon, so we still have time for tea.",
        "Could you send me the report before the meeting tomorrow?",
        "It rained all night, but the morning was bright and mild.",
    ),
    "es": (
        "El tren sale al mediodía, así que todavía tenemos tiempo para un café.",
        "¿Podrías enviarme el informe antes de la reunión de mañana?",
        "Llovió toda la noche, pero la mañana fue clara y cálida.",
    ),
    "fr": (
        "Le train part à midi, nous avons donc encore le temps de prendre un café.",
        "Pourriez-vous m'envoyer le rapport avant la réunion de demain ?",
        "Il a plu toute la nuit, mais la matinée était claire et douce.",
    ),
    "hi": (
        "ट्रेन दोपहर को निकलती है, इसलिए हमारे पास अभी कॉफ़ी के लिए समय है।",
        "क्या आप कल की बैठक से पहले मुझे रिपोर्ट भेज सकते हैं?",
        "रात भर बारिश हुई, लेकिन सुबह साफ़ और गर्म थी।",
    ),
    "it": (
        "Il treno parte a mezzogiorno, quindi abbiamo ancora tempo per un caffè.",
        "Potresti mandarmi il rapporto prima della riunione di domani?",
        "È piovuto tutta la notte, ma la mattina era limpida e calda.",
    ),
    "ja": (
        "電車は正午に出発するので、まだコーヒーを飲む時間があります。",
        "明日の会議の前に報告書を送っていただけますか？",
        "一晩中雨が降りましたが、朝は晴れて暖かかったです。",
    ),
    "pt-br": (
        "O trem sai ao meio-dia, então ainda temos tempo para um café.",
        "Você poderia me enviar o relatório antes da reunião de amanhã?",
        "Choveu a noite toda, mas a manhã foi clara e quente.",
    ),
    "zh": (
        "火车中午出发，所以我们还有时间喝杯咖啡。",
        "你能在明天开会之前把报告发给我吗？",
        "下了一整夜的雨，但早上晴朗又暖和。",
    ),
}
VOICES_PER_LANGUAGE = 2


def build_times() -> dict[str, float]:
    """Seconds each language's G2P takes to build on first use (English first: the others may use it)."""
    registry = G2PRegistry()
    times = {}
    for lang in registry.langs:
        started = time.perf_counter()
        registry.get(lang)
        times[lang] = round(time.perf_counter() - started, 2)
    return times


def measure(speech: Speech, lang: str) -> dict[str, Any]:
    voices = [v for v in VOICES if speech.voices.lang_of(v) == lang][:VOICES_PER_LANGUAGE]
    rows: list[dict[str, Any]] = []
    for voice in voices:
        for text in SENTENCES[lang]:
            spoken = rules_for(lang).normalize(text).spoken
            started = time.perf_counter()
            pieces = speech.phonemize(spoken, lang)
            g2p_s = time.perf_counter() - started
            started = time.perf_counter()
            audio = speech.synthesize(text, voice=voice)
            took = time.perf_counter() - started
            seconds = len(audio) / SAMPLE_RATE
            rows.append(
                {
                    "voice": voice,
                    "text": text,
                    "chars": len(text),
                    "tokens": sum(count_tokens(p) for p in pieces),
                    "audio_s": round(seconds, 3),
                    "g2p_ms": round(g2p_s * 1000, 1),
                    "rtf": round(took / seconds, 3),
                }
            )
    return {
        "voices": voices,
        "audio_s_per_char": statistics.median(r["audio_s"] / r["chars"] for r in rows),
        "tokens_per_char": statistics.median(r["tokens"] / r["chars"] for r in rows),
        "g2p_ms_median": statistics.median(r["g2p_ms"] for r in rows),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    builds = build_times()
    speech = Speech.load(SpeechOptions(EngineOptions(threads=2)))
    results = {lang: measure(speech, lang) for lang in SENTENCES}
    english = results["en-us"]["audio_s_per_char"]
    print("lang audio_s/char english_chars/char tokens/char g2p_ms build_s")
    for lang, entry in results.items():
        entry["english_chars_per_char"] = round(entry["audio_s_per_char"] / english, 2)
        entry["g2p_build_s"] = builds[lang]
        print(
            f"{lang} {entry['audio_s_per_char']:.3f} {entry['english_chars_per_char']:.2f} "
            f"{entry['tokens_per_char']:.2f} {entry['g2p_ms_median']:.0f} {builds[lang]:.2f}",
            flush=True,
        )
    if args.json:
        report = {"command": "python -m koe_bench.language_rates", "date": time.strftime("%Y-%m-%d"),
                  "languages": results}  # fmt: skip
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2, ensure_ascii=False)
            out.write("\n")


if __name__ == "__main__":
    main()
