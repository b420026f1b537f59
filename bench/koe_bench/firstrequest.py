"""The first request after a container's cold start, as an autoscaled endpoint gets it: ``koe serve`` in a
fresh process at a first start, asked to speak a sentence (streamed ``POST /invocations``) the moment
``/ping`` is 200, or :data:`LATER_S` after (while a first start of this koe measures its costs); the
listener's first speech, from the request, and its gaps. This koe and a baseline tree, interleaved.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from koe.errors import UpstreamError
from koe_bench.children import Koe, serving, until_ready
from koe_bench.firstaudio import SENTENCE, koe_http_turn

VOICE = "af_heart"
#: When the request is sent after ``/ping`` turns 200: at once (the load balancer's first), and while this
#: koe's first start times the longer of its two sentences (a second of quiet, the shorter, a second of
#: quiet, then ~1.1 s on this machine).
AT_READY_S = 0.0
LATER_S = 3.0


@dataclass(frozen=True, slots=True)
class FirstRequest:
    """One fresh server's first request: its start to ready, and what the listener heard."""

    kind: str
    ready_s: float
    first_speech_s: float
    gap_count: int
    max_gap_s: float


def first_request(koe: Koe, after_s: float) -> FirstRequest:
    """Start ``koe serve``, wait until ready and then ``after_s``, and speak :data:`SENTENCE`."""
    started = time.perf_counter()
    with serving([*koe.command(), "serve"], koe.env()) as (process, url):
        ready_s = until_ready(process, url, started)
        time.sleep(after_s)
        trace = asyncio.run(koe_http_turn(url, SENTENCE, VOICE, starts_at=time.monotonic()))
    playback = trace.playback
    if playback.first_speech_at is None:
        raise UpstreamError(f"the first request to {koe.kind('koe serve')} heard no speech")
    return FirstRequest(
        koe.kind(f"koe_serve_request_{after_s:g}s_after_ready"),
        ready_s,
        playback.first_speech_at,
        playback.gap_count,
        playback.max_gap_s,
    )


def _variants(workdir: Path, baseline: Path | None) -> Iterator[tuple[Koe, float]]:
    for src in [None] + ([baseline] if baseline is not None else []):
        for after_s in (AT_READY_S, LATER_S):
            yield Koe(src, without_torch=True, first_start_in=workdir), after_s


def runs(repeats: int, workdir: Path, baseline: Path | None = None) -> dict[str, list[FirstRequest]]:
    """``repeats`` rounds of each kind (this koe and the ``baseline``, each asked at ready and
    :data:`LATER_S` after), the order rotating from round to round."""
    variants = list(_variants(workdir, baseline))
    found: dict[str, list[FirstRequest]] = {}
    for repeat in range(repeats):
        shift = repeat % len(variants)
        for koe, after_s in variants[shift:] + variants[:shift]:
            run = first_request(koe, after_s)
            found.setdefault(run.kind, []).append(run)
    return found


def summarize(found: dict[str, list[FirstRequest]]) -> dict[str, Any]:
    """Medians per kind (gaps: the total over the runs and the longest), and every run."""
    return {
        kind: {
            "ready_s": statistics.median(r.ready_s for r in rs),
            "first_speech_s": statistics.median(r.first_speech_s for r in rs),
            "gap_count": sum(r.gap_count for r in rs),
            "max_gap_s": max(r.max_gap_s for r in rs),
            "runs": [asdict(r) for r in rs],
        }
        for kind, rs in found.items()
    }
