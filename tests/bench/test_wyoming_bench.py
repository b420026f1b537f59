"""The Wyoming scenario (``koe bench --only wyoming``): the reference client's turns against real Wyoming
servers. Its logic runs on the scripted fake engine, koe measured against a second koe standing in for the
peer; the peer itself, wyoming-piper in its own environment, is started and asked when ``make bench-peers``
has built that environment."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from koe.agent.replay import ReplayPace
from koe_bench import homeassistant, piper
from koe_bench.config import PIPER_PYTHON
from koe_bench.firstaudio import SENTENCE
from koe_bench.homeassistant import KOE, PEER
from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine, fake_seconds

#: Fast enough that a scenario takes well under a second on the fake engine.
PACE = ReplayPace(200.0, 0.0)
#: The scenarios on short texts: the fake engine's audio comes at the pace a listener plays it.
SHORT = {
    "streamed": ("Sure, here's the plan. Take the red line.", True),
    "answer_whole": ("Sure, here's the plan. Take the red line.", False),
    "sentence_whole": ("Take the red line north.", False),
}
#: The peer stand-in's engine: every segment takes this long, so it is measurably the later one.
PEER_DELAY_S = 0.3


def port_of(live: LiveServer) -> int:
    port: int = live.app.state.wyoming.port
    return port


@pytest.mark.bench_smoke
def test_every_scenario_times_both_servers_through_the_reference_client_and_compares_them(
    serve_fake: ServerFactory,
) -> None:
    with (
        serve_fake(wyoming_port=0) as koe,
        serve_fake(FakeEngine(delay_s=PEER_DELAY_S), wyoming_port=0) as peer,
    ):
        turns = {
            KOE: partial(homeassistant.wyoming_turn, port_of(koe), "af_heart", KOE),
            PEER: partial(homeassistant.wyoming_turn, port_of(peer), "af_heart", PEER),
        }
        steps: list[int] = []
        results = asyncio.run(
            homeassistant.measure(turns, PACE, 2, lambda: steps.append(1), settle_s=0.0, scenarios=SHORT)
        )
    assert set(results) == set(SHORT) and len(steps) == 2 * 2 * len(SHORT)
    for scenario, result in results.items():
        text, streamed = SHORT[scenario]
        koe_s, peer_s = result["strategies"][KOE], result["strategies"][PEER]
        # the whole text's audio, decoded from the audio-chunks of both
        assert koe_s["audio_s"]["median"] == pytest.approx(fake_seconds(text), rel=0.05)
        assert peer_s["audio_s"]["median"] == koe_s["audio_s"]["median"]
        assert koe_s["first_audio_s"]["n"] == 2
        # the slower engine is the later one, and the ratio says so
        assert peer_s["first_audio_s"]["median"] > PEER_DELAY_S > koe_s["first_audio_s"]["median"]
        ratio = result["ratios"]["koe_over_peer_first_audio_s"]
        assert ratio == koe_s["first_audio_s"]["median"] / peer_s["first_audio_s"]["median"] < 1
        # the turn ends at the last event of the answer, after its audio
        assert koe_s["total_s"]["median"] >= koe_s["first_audio_s"]["median"]
        assert (len(result["timelines"][KOE]["tokens"]) > 1) == streamed
    streamed_koe = results["streamed"]["strategies"][KOE]
    # streamed: audio after the first sentence was written, before the LLM finished the answer
    assert 0 < streamed_koe["first_audio_after_sentence_s"]["median"]
    assert streamed_koe["first_audio_s"]["median"] < results["streamed"]["timelines"][KOE]["tokens"][-1]
    targets = homeassistant.targets(results)
    assert set(targets) == {
        "first_audio_after_first_clause_s",
        "gaps_one_listener",
        "longest_wait_for_audio_s",
    }
    assert all(isinstance(t["met"], bool) for t in targets.values())
    title, columns, rows, notes = homeassistant.table({"scenarios": results})
    assert len(rows) == 2 * len(SHORT) and all(len(row) == len(columns) for row in rows)
    assert title.startswith("12 ") and len(notes) == len(SHORT)


@pytest.mark.slow
@pytest.mark.skipif(
    piper.installed(PIPER_PYTHON) is None, reason=f"no wyoming-piper at {PIPER_PYTHON}: make bench-peers"
)
def test_wyoming_piper_starts_offline_and_streams_its_voice_through_the_same_client() -> None:
    found = piper.installed(PIPER_PYTHON)
    assert found is not None
    with piper.server(PIPER_PYTHON, found) as port:
        trace = asyncio.run(homeassistant.wyoming_turn(port, piper.VOICE, PEER, SENTENCE, PACE))
    metrics = trace.metrics()
    # a 12-word sentence at Piper's 22,050 Hz: seconds of speech, heard, after the text was written
    audio_s = metrics["audio_s"]
    assert isinstance(audio_s, float) and 2.0 < audio_s < 6.0
    assert metrics["first_speech_s"] is not None
    assert trace.first_sentence_at is not None and trace.first_audio_s > trace.first_sentence_at
