"""A turn's or request's tally: what its one log line reports."""

from __future__ import annotations

import pytest

from koe.pipeline.tally import Tally


def test_an_empty_tally_reports_no_rates() -> None:
    assert Tally().fields(started_at=0.0) == {
        "outcome": "abandoned",
        "segments": 0,
        "audio_s": 0.0,
        "first_audio_ms": None,
        "rtf": None,
    }


def test_segments_audio_rtf_and_first_audio_add_up() -> None:
    tally = Tally()
    tally.add(0.5, 0.0)  # a segment with nothing speakable: its time counts, it is no segment
    assert tally.first_audio_at is None
    tally.audio_sent()
    tally.add(0.3, 1.0)
    first = tally.first_audio_at
    tally.audio_sent()
    tally.add(0.2, 1.5)
    assert tally.first_audio_at == first  # the first audio stays the first
    assert first is not None
    fields = tally.fields(started_at=first - 0.25)
    assert fields["segments"] == 2
    assert fields["audio_s"] == 2.5
    assert fields["rtf"] == pytest.approx(1.0 / 2.5)
    assert fields["first_audio_ms"] == 250.0
    assert tally.fields(started_at=None)["first_audio_ms"] is None


def test_the_first_audio_is_when_a_segments_first_part_went_out_not_when_it_ended() -> None:
    tally = Tally()
    tally.audio_sent()  # a windowed segment's first part
    first = tally.first_audio_at
    tally.add(0.8, 2.0)  # that segment, ended
    assert first is not None and tally.first_audio_at == first
    assert tally.fields(started_at=first)["segments"] == 1


def test_a_fast_engines_rtf_keeps_its_significant_digits_instead_of_rounding_to_zero() -> None:
    tally = Tally()
    tally.add(0.0004, 2.0)  # 0.4 ms for 2 s of audio: a GPU's or the fake engine's pace
    assert tally.fields(started_at=None)["rtf"] == 0.0002
