from __future__ import annotations

import pytest

from koe.audio.formats import (
    OPUS_SAMPLE_RATES,
    SUPPORTED_SAMPLE_RATES,
    AudioFormat,
    check_sample_rate,
    content_type,
    parse_format,
)
from koe.errors import ConfigError


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_every_format_name_parses_case_insensitively(fmt: AudioFormat) -> None:
    assert parse_format(fmt.value) is fmt
    assert parse_format(f" {fmt.value.upper()} ") is fmt


@pytest.mark.parametrize(("alias", "fmt"), [("pcm_s16le", AudioFormat.PCM), ("ulaw", AudioFormat.MULAW)])
def test_protocol_aliases_parse(alias: str, fmt: AudioFormat) -> None:
    assert parse_format(alias) is fmt


def test_unknown_format_error_names_the_value_and_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        parse_format("ogg")
    assert "'ogg'" in info.value.message
    for fmt in AudioFormat:
        assert fmt.value in info.value.message
    assert info.value.code == "invalid_request"


@pytest.mark.parametrize("fmt", list(AudioFormat))
@pytest.mark.parametrize("rate", SUPPORTED_SAMPLE_RATES)
def test_rate_is_accepted_unless_the_codec_cannot_run_at_it(fmt: AudioFormat, rate: int) -> None:
    if fmt is AudioFormat.OPUS and rate not in OPUS_SAMPLE_RATES:
        expected = rf"sample_rate for opus must be one of 8000, 16000, 24000, 48000 Hz; got {rate}"
        with pytest.raises(ConfigError, match=expected):
            check_sample_rate(fmt, rate)
    else:
        assert check_sample_rate(fmt, rate) == rate


@pytest.mark.parametrize("rate", [0, -24000, 11025, 96000])
def test_unsupported_rate_error_lists_the_supported_ones(rate: int) -> None:
    with pytest.raises(ConfigError) as info:
        check_sample_rate(AudioFormat.WAV, rate)
    assert f"got {rate}" in info.value.message
    assert "8000, 16000, 22050, 24000, 44100, 48000" in info.value.message


def test_opus_rates_are_supported_rates() -> None:
    assert set(OPUS_SAMPLE_RATES) < set(SUPPORTED_SAMPLE_RATES)


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (AudioFormat.PCM, "audio/pcm"),
        (AudioFormat.WAV, "audio/wav"),
        (AudioFormat.MP3, "audio/mpeg"),
        (AudioFormat.OPUS, "audio/ogg; codecs=opus"),
        (AudioFormat.FLAC, "audio/flac"),
        (AudioFormat.AAC, "audio/aac"),
        (AudioFormat.MULAW, "audio/PCMU"),
        (AudioFormat.ALAW, "audio/PCMA"),
    ],
)
def test_content_type_per_format(fmt: AudioFormat, expected: str) -> None:
    assert content_type(fmt) == expected
