"""The agent-vs-stream scenario's logic on the scripted fake engine: a real server, both real clients."""

from __future__ import annotations

import asyncio

import pytest

from koe.agent.replay import ReplayPace
from koe_bench import agentstream
from koe_bench.firstaudio import ANSWER
from live_server import ServerFactory

#: Fast enough for a test, slow enough that the text arrives over several cuts.
PACE = ReplayPace(tokens_per_s=100.0, first_token_delay_s=0.05)


def test_both_paths_speak_the_same_text_and_the_report_holds_their_ratios(serve_fake: ServerFactory) -> None:
    with serve_fake() as server:
        result = asyncio.run(
            agentstream.measure(
                agentstream.paths(server.http_url), ANSWER, PACE, "af_heart", repeats=2, settle_s=0.0
            )
        )
    paths = result["paths"]
    assert set(paths) == {agentstream.AGENT, agentstream.STREAM}
    for summary in paths.values():
        assert summary["first_audio_s"]["n"] == 2
        assert summary["first_speech_s"]["median"] >= summary["first_audio_s"]["median"] > 0
    # the same text spoken whole on both paths (later cuts follow each listener's buffer: a word apart)
    assert paths[agentstream.AGENT]["audio_s"]["median"] == pytest.approx(
        paths[agentstream.STREAM]["audio_s"]["median"], abs=0.5
    )
    for metric, ratio in result["agent_over_stream"].items():
        assert (
            ratio == paths[agentstream.AGENT][metric]["median"] / paths[agentstream.STREAM][metric]["median"]
        )
    assert len(result["rounds"]) == 2
    for played in result["rounds"]:
        agent, stream = played[agentstream.AGENT], played[agentstream.STREAM]
        assert played["agent_over_stream_first_audio_s"] == agent["first_audio_s"] / stream["first_audio_s"]
        # the client timed the replay's text on the agent path as it times its own on /v1/stream
        assert agent["first_sentence_at_s"] >= PACE.first_token_delay_s
        assert stream["first_sentence_at_s"] >= PACE.first_token_delay_s
        assert agent["first_segment_text"] and stream["first_segment_text"]
    targets = agentstream.targets(result)
    assert set(targets) == {
        "first_audio_s_within_1.3x",
        "first_speech_s_within_1.3x",
        f"{agentstream.AGENT}_gap_free",
        f"{agentstream.STREAM}_gap_free",
    }


def test_the_bar_holds_either_way_within_its_factor() -> None:
    def result(first_audio_ratio: float) -> dict[str, object]:
        gaps = {"gap_count": {"max": 0}}
        return {
            "agent_over_stream": {"first_audio_s": first_audio_ratio, "first_speech_s": None},
            "paths": {agentstream.AGENT: gaps, agentstream.STREAM: gaps},
        }

    assert agentstream.targets(result(1.25))["first_audio_s_within_1.3x"] is True
    assert agentstream.targets(result(1 / 1.25))["first_audio_s_within_1.3x"] is True
    assert agentstream.targets(result(1.35))["first_audio_s_within_1.3x"] is False
    assert agentstream.targets(result(1 / 1.35))["first_audio_s_within_1.3x"] is False
    assert agentstream.targets(result(1.0))["first_speech_s_within_1.3x"] is None
