"""Output formats and sample rates: the names clients may ask for and which combinations are valid.

Pure and cheap: the server validates request fields with these before any audio exists.
"""

from __future__ import annotations

import reprlib
from enum import StrEnum

from koe.errors import ConfigError


class AudioFormat(StrEnum):
    """Every byte format koe can send; the value is the name clients use."""

    PCM = "pcm"  # raw signed 16-bit little-endian, no header
    WAV = "wav"
    MP3 = "mp3"
    OPUS = "opus"  # Opus in an Ogg container
    FLAC = "flac"
    AAC = "aac"  # AAC-LC in ADTS frames
    MULAW = "mulaw"  # raw G.711 μ-law, one byte per sample
    ALAW = "alaw"  # raw G.711 A-law, one byte per sample


#: Output rates koe resamples to (Hz); Kokoro itself produces 24 kHz.
SUPPORTED_SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 22050, 24000, 44100, 48000)

#: Opus only encodes at these rates; 22050 and 44100 are refused rather than silently changed.
OPUS_SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 24000, 48000)

# Other spellings clients send: the WebSocket protocol calls raw PCM `pcm_s16le`, telephony stacks say `ulaw`.
_ALIASES: dict[str, AudioFormat] = {"pcm_s16le": AudioFormat.PCM, "ulaw": AudioFormat.MULAW}

_CONTENT_TYPES: dict[AudioFormat, str] = {
    AudioFormat.PCM: "audio/pcm",
    AudioFormat.WAV: "audio/wav",
    AudioFormat.MP3: "audio/mpeg",
    AudioFormat.OPUS: "audio/ogg; codecs=opus",
    AudioFormat.FLAC: "audio/flac",
    AudioFormat.AAC: "audio/aac",
    AudioFormat.MULAW: "audio/PCMU",
    AudioFormat.ALAW: "audio/PCMA",
}


def parse_format(value: str) -> AudioFormat:
    """Map a client-supplied format name (case-insensitive, aliases allowed) to an `AudioFormat`.

    Raises:
        ConfigError: the name is not a known format; the message lists the valid ones.
    """
    name = value.strip().lower()
    if name in _ALIASES:
        return _ALIASES[name]
    try:
        return AudioFormat(name)
    except ValueError:
        valid = ", ".join([*AudioFormat, *_ALIASES])
        raise ConfigError(f"format must be one of {valid}; got {value!r}") from None


def check_sample_rate(fmt: AudioFormat, sample_rate: int) -> int:
    """Return `sample_rate` if `fmt` can be encoded at it.

    Raises:
        ConfigError: the rate is not one of `SUPPORTED_SAMPLE_RATES`, or the codec cannot run at it
            (Opus: 22050 and 44100 Hz).
    """
    valid = OPUS_SAMPLE_RATES if fmt is AudioFormat.OPUS else SUPPORTED_SAMPLE_RATES
    if sample_rate not in valid:
        listed = ", ".join(str(rate) for rate in valid)
        raise ConfigError(
            f"sample_rate for {fmt.value} must be one of {listed} Hz; got {reprlib.repr(sample_rate)}"
        )
    return sample_rate


def content_type(fmt: AudioFormat) -> str:
    """The HTTP Content-Type for a response body in `fmt`."""
    return _CONTENT_TYPES[fmt]
