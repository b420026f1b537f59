"""The first-audio scenario's logic on the scripted fake engine: real servers and clients, every
scenario, koe against itself before the change and against a peer that answers whole texts."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

from koe.agent.replay import ReplayPace
from koe_bench import fastkokoro, firstaudio
from koe_bench.config import BenchConfig
from koe_bench.stats import Chunk
from koe_bench.turns import TurnTrace
from live_server import ServerFactory

#: The peer speaks every text as 2 s of audio, 0.5 s after it is asked.
PEER_DELAY_S = 0.5


async def slow_peer(text: str, starts_at: float) -> TurnTrace:
    await asyncio.sleep(PEER_DELAY_S)
    trace = TurnTrace("peer")
    trace.chunks.append(Chunk(time.monotonic() - starts_at, 2.0, 0.1))
    return trace


def test_every_scenario_compares_koe_with_its_peers_and_with_itself_before(
    serve_fake: ServerFactory, tmp_path: Path
) -> None:
    config = BenchConfig(tmp_path, repeats=1, pace=ReplayPace(200.0, 0.0))
    with serve_fake() as now, serve_fake(windowed_first=False) as before:
        urls = {firstaudio.KOE: now.http_url, firstaudio.KOE_BEFORE: before.http_url}
        steps: list[int] = []
        results = asyncio.run(
            firstaudio.measure(config, urls, {"peer": slow_peer}, lambda: steps.append(1), settle_s=0.0)
        )
    assert set(results) == set(firstaudio.SCENARIOS)
    assert len(steps) == 2 * 4 + 2 * 3  # whole texts: koe, before, HTTP, peer; streamed: no HTTP
    for name, result in results.items():
        strategies = result["strategies"]
        whole = not firstaudio.SCENARIOS[name][1]
        assert (firstaudio.KOE_HTTP in strategies) == whole
        sessions = firstaudio.SCENARIOS[name][2]
        assert result["sessions"] == sessions
        assert strategies[firstaudio.KOE]["first_audio_s"]["n"] == sessions
        for summary in strategies.values():
            assert summary["first_speech_s"]["median"] >= summary["first_audio_s"]["median"] > 0
        # koe spoke the same text with and without the change, the peer its own 2 s
        assert (
            strategies[firstaudio.KOE]["audio_s"]["median"]
            == strategies[firstaudio.KOE_BEFORE]["audio_s"]["median"]
        )
        assert strategies["peer"]["audio_s"]["median"] == 2.0
        assert strategies["peer"]["first_audio_s"]["median"] >= PEER_DELAY_S
        ratios = result["ratios"]
        peer_first = strategies["peer"]["first_audio_s"]["median"]
        assert (
            ratios["koe_over_best_peer_first_audio_s"]
            == strategies[firstaudio.KOE]["first_audio_s"]["median"] / peer_first
        )
    # a streamed peer is asked only once the simulated LLM has written everything
    streamed = results["streamed"]["strategies"]["peer"]["first_audio_s"]["median"]
    assert streamed > results["answer_whole"]["strategies"]["peer"]["first_audio_s"]["median"]
    targets = firstaudio.targets(results)
    assert targets["two_streamed"]["gap_free"] is None  # two sessions on one machine: reported, not judged
    assert all(
        isinstance(targets[name]["gap_free"], bool) for name in ("sentence_whole", "answer_whole", "streamed")
    )


def test_no_strategy_always_runs_right_after_the_same_other() -> None:
    names = [f"strategy {n}" for n in range(7)]
    rounds = [firstaudio.round_order(names, repeat) for repeat in range(3)]
    assert all(sorted(order) == names for order in rounds)
    assert rounds == [firstaudio.round_order(names, repeat) for repeat in range(3)]  # the same run after run
    follows = [set(itertools.pairwise(order)) for order in rounds]
    assert not set.intersection(*follows)


def test_a_missing_peer_environment_is_reported_not_guessed(tmp_path: Path) -> None:
    assert fastkokoro.version(tmp_path / "no-such-python") is None
