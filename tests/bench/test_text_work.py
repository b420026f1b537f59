"""The text-work scenario: per language, the CPU its segmenting and G2P cost against the audio they make, on
the fake engine and G2P; a language without its G2P is named as skipped, not measured."""

from __future__ import annotations

import math

from koe.pipeline.speech import Speech
from koe_bench.textwork import COMMAND, SCHEMA, TEXTS, measure, run_alone
from support.fake import FakeEngine, FakeG2P, fake_seconds, fake_speech, fake_voices

#: The figures are rounded to 4 significant digits; a ratio recomputed from them is within this of it.
RATIO_TOLERANCE = 0.002


def test_each_language_reports_its_cpu_per_second_of_audio_made() -> None:
    report = measure(fake_speech(), repeats=2)
    assert report["skipped"] == {}
    assert set(report["languages"]) == set(TEXTS)
    for lang, result in report["languages"].items():
        voice, texts = TEXTS[lang]
        assert result["voice"] == voice
        assert result["chars"] == sum(len(text) for text in texts)
        assert result["segments"] >= len(texts)  # each answer is cut into one segment or more
        # the fake engine's durations: at most one segment's pads more per segment than the whole text's
        assert result["audio_s"] >= sum(fake_seconds(text) for text in texts) * 0.9
        assert result["segment_cpu_s"] > 0 and result["g2p_cpu_s"] > 0
        cpu_s = result["segment_cpu_s"] + result["g2p_cpu_s"]
        assert math.isclose(result["cores_per_session"], cpu_s / result["audio_s"], rel_tol=RATIO_TOLERANCE)
        assert math.isclose(result["audio_s_per_cpu_s"], result["audio_s"] / cpu_s, rel_tol=RATIO_TOLERANCE)
        assert math.isclose(
            result["g2p_audio_s_per_cpu_s"], result["audio_s"] / result["g2p_cpu_s"], rel_tol=RATIO_TOLERANCE
        )
        per_segment_ms = result["g2p_cpu_s"] * 1000 / result["segments"]
        assert math.isclose(result["g2p_ms_per_segment"], per_segment_ms, rel_tol=RATIO_TOLERANCE)


def test_a_language_whose_g2p_is_missing_is_skipped_and_named() -> None:
    speech = Speech(FakeEngine(), fake_voices(), {"en-us": FakeG2P("en-us")})
    report = measure(speech, repeats=1)
    assert set(report["languages"]) == {"en-us"}
    assert set(report["skipped"]) == set(TEXTS) - {"en-us"}
    assert all("no G2P" in reason for reason in report["skipped"].values())


def test_the_result_file_names_its_run_and_engine_before_the_figures() -> None:
    report = run_alone(fake_speech(), repeats=1)
    assert report["schema"] == SCHEMA and report["command"] == COMMAND
    assert report["config"] == {"repeats": 1, "engine": FakeEngine().description}
    assert {"started_at", "machine", "elapsed_s"} <= set(report)
    assert set(report["languages"]) == set(TEXTS)
