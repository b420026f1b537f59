"""``koe bench`` scenario: repeated agent turns that open with common openers, with and without the cache.

Two servers share the loaded model: one with the segment cache pre-warmed with the openers (a
``KOE_PRECACHE`` file naming four of the built-in ones), one without a cache. Each turn streams an answer at
the LLM's pace: an opener, then a sentence that differs from turn to turn, so only the opener can be a
hit. Turns alternate between the two servers (the order rotating), and the figure that matters is the
listener's wait from the opener being written to its first audio.

Run alone: ``python -m koe_bench.openers [--rounds N] [--json out.json]`` (the model as ``koe serve`` loads
it, the default pace and voice of ``koe bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from koe.agent.replay import ReplayPace
from koe.errors import UpstreamError
from koe.pipeline.precache import BUILTIN_OPENERS
from koe.pipeline.speech import Speech, SpeechOptions
from koe.settings import Settings
from koe_bench.resultfile import emit
from koe_bench.stats import summarize
from koe_bench.target import bench_settings, in_process_server
from koe_bench.turns import TurnTrace, koe_turn

#: Openers from the built-in list, and the sentences that follow them (each turn pairs them differently).
OPENERS = BUILTIN_OPENERS[:4]
FOLLOW_UPS = (
    "The museum opens at nine on weekdays and at ten on weekends.",
    "Your order shipped this morning and should arrive on Friday.",
    "The meeting moved to three in the afternoon, in the same room.",
    "The train is running about ten minutes late tonight.",
    "Your balance is forty two dollars after the last payment.",
)
KINDS = ("koe_cached", "koe_uncached")
#: Pre-warming a dozen openers on a loaded 2-core machine takes well under this.
_PRECACHE_TIMEOUT_S = 300.0
_POLL_S = 0.2
_CACHE_MB = 64.0


def answers(turns: int) -> list[str]:
    """``turns`` answers: the openers in turn, each followed by a sentence it was not paired with before
    (five sentences against four openers: an opener meets each sentence once in five rounds)."""
    return [f"{OPENERS[n % len(OPENERS)]} {FOLLOW_UPS[n % len(FOLLOW_UPS)]}" for n in range(turns)]


def cache_stats(base_url: str) -> dict[str, float]:
    """The server's ``koe_segment_cache_*`` samples (lookups by their result)."""
    found: dict[str, float] = {}
    text = httpx.get(base_url + "/metrics", timeout=10.0).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("koe_segment_cache"):
                result = sample.labels.get("result")
                found[sample.name + (f"_{result}" if result else "")] = sample.value
    return found


def _wait_precached(base_url: str) -> float:
    """Block until every opener is stored; the seconds it took."""
    started = time.monotonic()
    while cache_stats(base_url).get("koe_segment_cache_stores_total", 0) < len(OPENERS):
        if time.monotonic() - started > _PRECACHE_TIMEOUT_S:
            raise UpstreamError(f"pre-warming did not finish within {_PRECACHE_TIMEOUT_S:g} s")
        time.sleep(_POLL_S)
    return time.monotonic() - started


def _after_opener(trace: TurnTrace) -> float:
    if trace.first_sentence_at is None:
        raise UpstreamError(f"the {trace.strategy} turn never completed its opener")
    return trace.first_audio_s - trace.first_sentence_at


@contextmanager
def _servers(settings: Settings, speech: Speech, voice: str) -> Iterator[dict[str, str]]:
    """The cached (pre-warmed) and the uncached server, by kind, once both are ready."""
    with tempfile.TemporaryDirectory(prefix="koe-openers-") as scratch:
        openers = Path(scratch) / "openers.json"
        openers.write_text(json.dumps({voice: list(OPENERS)}))
        cached = replace(settings, segment_cache_mb=_CACHE_MB, precache=str(openers))
        uncached = replace(settings, segment_cache_mb=0.0, precache=None)
        with (
            in_process_server(cached, speech) as cached_url,
            in_process_server(uncached, speech) as plain_url,
        ):
            yield {"koe_cached": cached_url, "koe_uncached": plain_url}


async def scenario(
    settings: Settings, speech: Speech, pace: ReplayPace, voice: str, repeats: int, steps: Any
) -> dict[str, Any]:
    """``repeats`` rounds over every opener on both servers (``steps``: the run's progress bars)."""
    step = steps.add("8 openers (cached / uncached)", repeats * len(OPENERS) * len(KINDS))
    with _servers(settings, speech, voice) as urls:
        return await _turns(urls, pace, voice, repeats, step)


async def _turns(
    urls: Mapping[str, str], pace: ReplayPace, voice: str, repeats: int, step: Callable[[], None]
) -> dict[str, Any]:
    precache_s = await asyncio.to_thread(_wait_precached, urls["koe_cached"])
    before = await asyncio.to_thread(cache_stats, urls["koe_cached"])
    traces: dict[str, list[TurnTrace]] = {kind: [] for kind in KINDS}
    for n, answer in enumerate(answers(repeats * len(OPENERS))):
        for kind in KINDS if n % 2 == 0 else KINDS[::-1]:
            traces[kind].append(await koe_turn(urls[kind], answer, pace, voice, strategy=kind))
            step()
    after = await asyncio.to_thread(cache_stats, urls["koe_cached"])
    kinds: dict[str, dict[str, Any]] = {
        kind: {
            "first_audio_after_opener_s": asdict(summarize([_after_opener(t) for t in runs])),
            "first_audio_s": asdict(summarize([t.first_audio_s for t in runs])),
            "turns": len(runs),
        }
        for kind, runs in traces.items()
    }
    cached = kinds["koe_cached"]["first_audio_after_opener_s"]["median"]
    uncached = kinds["koe_uncached"]["first_audio_after_opener_s"]["median"]
    lookups = {
        result: after[f"koe_segment_cache_lookups_total_{result}"]
        - before[f"koe_segment_cache_lookups_total_{result}"]
        for result in ("hit", "miss")
    }
    return {
        "openers": list(OPENERS),
        "kinds": kinds,
        "uncached_over_cached_first_audio": uncached / cached if cached > 0 else None,
        "precache_s": precache_s,
        "cache": {
            "hits": lookups["hit"],
            "misses": lookups["miss"],
            "entries": after["koe_segment_cache_entries"],
            "bytes": after["koe_segment_cache_bytes"],
        },
    }


def table(scenario: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The scenario as a report section: title, columns, rows, notes."""
    rows: list[tuple[str, ...]] = []
    for kind, row in scenario["kinds"].items():
        opener, start = row["first_audio_after_opener_s"], row["first_audio_s"]
        tail = opener["p95"] if opener["p95"] is not None else opener["max"]
        rows.append((kind, f"{opener['median']:.3f}", f"{tail:.3f}", f"{start['median']:.2f}"))
    cache = scenario["cache"]
    ratio = scenario["uncached_over_cached_first_audio"]
    notes = [
        f"opener written → first audio: uncached / cached = {ratio:.0f}×" if ratio else "no ratio",
        f"cached server: {cache['hits']:.0f} hits, {cache['misses']:.0f} misses; {cache['entries']:.0f} "
        f"segments, {cache['bytes'] / 2**20:.1f} MB; pre-warming took {scenario['precache_s']:.1f} s after "
        "ready",
    ]
    title = f"8 · openers, repeated turns ({len(scenario['openers'])} openers, medians)"
    columns = ("server", "opener → first audio s", "p95 (or max) s", "turn start → first audio s")
    return title, columns, rows, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the openers")
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = bench_settings()
    speech = Speech.load(SpeechOptions.from_settings(settings, warmup=False))
    load_avg = os.getloadavg()[0]
    with _servers(settings, speech, args.voice) as urls:
        report = asyncio.run(_turns(urls, ReplayPace(), args.voice, args.rounds, lambda: None))
    report |= {"rounds": args.rounds, "voice": args.voice, "cpus": os.cpu_count()}
    report |= {"load_avg_1m": load_avg, "load_avg_1m_end": os.getloadavg()[0]}
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
