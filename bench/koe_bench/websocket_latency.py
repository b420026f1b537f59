"""Time to first audio and playback gaps over koe's WebSocket protocol (a benchmark, not a test).

Two measurements, each over ``--runs`` runs, reported as medians:

* **flush → first audio**: a one-sentence turn is appended whole and flushed; the clock runs from the
  flush to the first binary audio frame.
* **first clause → first audio**: an LLM-like answer is streamed token by token at ``--tokens-per-s``;
  the clock runs from the moment the first segment's text (and the character after it, which makes its
  boundary certain) has been sent, to the first audio frame. The same run measures the longest silence
  after the first audio for a listener that plays every frame in real time from its arrival.

``--sessions N`` runs N such streaming sessions at once (capacity). The server runs in this process on a
free loopback port (``--workers``/``--threads`` choose the engine layout) unless ``--url`` names one.

    python -m koe_bench.websocket_latency --runs 5
    python -m koe_bench.websocket_latency --workers 2 --threads 1 --sessions 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import httpx
import uvicorn
from websockets.asyncio.client import ClientConnection, connect

from koe.app import create_app
from koe.server.serve import uvicorn_config
from koe.settings import Settings

SENTENCE = "The quick brown fox jumps over the lazy dog."
#: Short sentences, then a long one: a plain sentence split leaves a long silence before the long one.
ANSWER = (
    "Sure, I can help with that. The forecast says rain. "
    "Tomorrow morning a band of heavy showers will move in from the west, bringing strong winds, "
    "cooler air and a chance of thunder across most of the region until the early evening hours."
)
PCM_BYTES_PER_S = 24_000 * 2


@dataclass(frozen=True)
class Run:
    flush_to_audio_s: float
    clause_to_audio_s: float
    max_gap_s: float
    audio_s: float


def tokens(text: str) -> list[str]:
    """Roughly what an LLM streams: words with their leading space, punctuation attached."""
    words = text.split(" ")
    return [words[0], *(" " + w for w in words[1:])]


async def _collect_turn(
    ws: ClientConnection,
) -> tuple[float | None, list[tuple[float, int]], dict[str, object]]:
    """Read one turn: (first audio time, [(arrival, bytes)], first segment message)."""
    first_audio: float | None = None
    frames: list[tuple[float, int]] = []
    first_segment: dict[str, object] = {}
    while True:
        message = await ws.recv()
        now = time.monotonic()
        if isinstance(message, bytes):
            first_audio = first_audio or now
            frames.append((now, len(message)))
            continue
        event = json.loads(message)
        if event["type"] == "segment" and not first_segment:
            first_segment = event
        if event["type"] == "flushed":
            return first_audio, frames, first_segment
        if event["type"] == "error":
            raise RuntimeError(f"server error: {event}")


def longest_gap(frames: list[tuple[float, int]]) -> float:
    """The longest silence of a listener playing each frame in real time from its arrival."""
    playing_until = frames[0][0]
    gap = 0.0
    for arrival, size in frames:
        gap = max(gap, arrival - playing_until)
        playing_until = max(playing_until, arrival) + size / PCM_BYTES_PER_S
    return gap


async def flush_to_first_audio(url: str) -> float:
    async with connect(url + "/v1/stream") as ws:
        await ws.send(json.dumps({"type": "append", "text": SENTENCE}))
        flushed_at = time.monotonic()
        await ws.send(json.dumps({"type": "flush"}))
        first_audio, _, _ = await _collect_turn(ws)
    assert first_audio is not None
    return first_audio - flushed_at


async def streamed_answer(url: str, tokens_per_s: float) -> tuple[float, float, float]:
    """(first clause → first audio, longest gap, audio seconds) for one token-streamed answer."""
    sent_at: list[tuple[int, float]] = []  # (characters sent so far, time)
    async with connect(url + "/v1/stream") as ws:

        async def produce() -> None:
            total = 0
            for token in tokens(ANSWER):
                await ws.send(json.dumps({"type": "append", "text": token}))
                total += len(token)
                sent_at.append((total, time.monotonic()))
                await asyncio.sleep(1 / tokens_per_s)
            await ws.send(json.dumps({"type": "flush"}))

        producer = asyncio.create_task(produce())
        first_audio, frames, first_segment = await _collect_turn(ws)
        await producer
    assert first_audio is not None
    span = first_segment["source_span"]
    assert isinstance(span, list)
    certain_at = span[1] + 1  # the character after the segment decides its boundary
    clause_at = next(t for chars, t in sent_at if chars >= min(certain_at, len(ANSWER)))
    return first_audio - clause_at, longest_gap(frames), sum(size for _, size in frames) / PCM_BYTES_PER_S


async def one_run(url: str, sessions: int, tokens_per_s: float) -> list[Run]:
    flush_s = await flush_to_first_audio(url)
    streamed = await asyncio.gather(*(streamed_answer(url, tokens_per_s) for _ in range(sessions)))
    return [Run(flush_s, clause, gap, audio) for clause, gap, audio in streamed]


@contextmanager
def local_server(workers: int, threads: int) -> Iterator[str]:
    settings = Settings.from_env({}, host="127.0.0.1", port=0, workers=workers, threads_per_worker=threads)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(create_app(settings), settings, port=sock.getsockname()[1]))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    url = f"ws://127.0.0.1:{sock.getsockname()[1]}"
    ping = f"http://127.0.0.1:{sock.getsockname()[1]}/ping"
    while not server.started or httpx.get(ping).status_code != 200:
        time.sleep(0.2)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server, e.g. ws://127.0.0.1:8080 (default: start one)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=1, help="streaming sessions at once")
    parser.add_argument("--tokens-per-s", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    with local_server(args.workers, args.threads) if args.url is None else _given(args.url) as url:
        asyncio.run(one_run(url, 1, args.tokens_per_s))  # warm-up run, not counted
        runs = [
            run
            for _ in range(args.runs)
            for run in asyncio.run(one_run(url, args.sessions, args.tokens_per_s))
        ]
    summary = {
        "layout": f"{args.workers} worker(s) x {args.threads} thread(s)" if args.url is None else args.url,
        "sessions": args.sessions,
        "tokens_per_s": args.tokens_per_s,
        "runs": args.runs,
        "load_average": os.getloadavg()[0],
        "median_flush_to_first_audio_s": round(statistics.median(r.flush_to_audio_s for r in runs), 3),
        "median_first_clause_to_first_audio_s": round(
            statistics.median(r.clause_to_audio_s for r in runs), 3
        ),
        "median_longest_gap_s": round(statistics.median(r.max_gap_s for r in runs), 3),
        "worst_longest_gap_s": round(max(r.max_gap_s for r in runs), 3),
        "all": [asdict(r) for r in runs],
    }
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url.rstrip("/")


if __name__ == "__main__":
    sys.exit(main())
