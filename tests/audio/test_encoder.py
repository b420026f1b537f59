"""Encoded bytes are checked by decoding them with libsndfile (soundfile) and FFmpeg's decoders (PyAV).

libsndfile cannot read AAC, and python-soundfile fails on FLAC whose header says "length unknown" (it
seeks after each read), so those are decoded by PyAV only. FFmpeg decodes Opus at 48 kHz whatever the
rate it was encoded at; libsndfile honours the rate in the Opus header.
"""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import pytest
import soundfile as sf

from koe.audio.encoder import StreamEncoder, body_encoder, encode_whole
from koe.audio.formats import OPUS_SAMPLE_RATES, SUPPORTED_SAMPLE_RATES, AudioFormat
from koe.audio.muxer import Muxer
from koe.audio.pcm import to_int16
from koe.audio.resample import output_samples, resample
from koe.errors import ConfigError
from koe.types import SAMPLE_RATE, Audio

_TONE_HZ = 440.0
_AMPLITUDE = 0.5
_SECONDS = 0.5
_RAW = {
    AudioFormat.PCM: ("s16le", "PCM_16"),
    AudioFormat.MULAW: ("mulaw", "ULAW"),
    AudioFormat.ALAW: ("alaw", "ALAW"),
}
# Extra samples a decoder may return beyond the input, for codecs whose stream cannot say how much to trim:
# MP3 without a LAME frame: 1105 samples of encoder delay plus padding to a frame of up to 1152;
# AAC in ADTS: 1024 priming samples plus padding to a 1024-sample frame.
_MP3_STREAM_SLACK = 1105 + 1152
_AAC_SLACK = 1024 + 1024
_LOSSLESS = {AudioFormat.PCM, AudioFormat.WAV, AudioFormat.FLAC}


def _tone(n: int) -> Audio:
    return (_AMPLITUDE * np.sin(2 * np.pi * _TONE_HZ * np.arange(n) / SAMPLE_RATE)).astype(np.float32)


def _cases() -> list[tuple[AudioFormat, int]]:
    return [
        (fmt, rate)
        for fmt in AudioFormat
        for rate in SUPPORTED_SAMPLE_RATES
        if fmt is not AudioFormat.OPUS or rate in OPUS_SAMPLE_RATES
    ]


def _decode_av(data: bytes, fmt: AudioFormat, rate: int) -> tuple[np.ndarray, int]:
    demuxer, options = (_RAW[fmt][0], {"sample_rate": str(rate)}) if fmt in _RAW else (None, {})
    with av.open(io.BytesIO(data), format=demuxer, options=options) as container:
        frames = list(container.decode(audio=0))
    if not frames:
        return np.zeros(0), 0
    samples = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
    scale = 32768.0 if samples.dtype == np.int16 else 1.0  # s16 decoders: back to [-1, 1) like libsndfile
    return samples / scale, frames[0].sample_rate


def _decode_soundfile(data: bytes, fmt: AudioFormat, rate: int) -> tuple[np.ndarray, int]:
    if fmt in _RAW:
        samples, decoded_rate = sf.read(
            io.BytesIO(data), format="RAW", subtype=_RAW[fmt][1], samplerate=rate, channels=1
        )
    else:
        samples, decoded_rate = sf.read(io.BytesIO(data))
    return samples, decoded_rate


def _stream(fmt: AudioFormat, rate: int, audio: Audio, seed: int = 0) -> tuple[bytes, list[bytes]]:
    """Encode in irregular chunks of 1 to 2400 samples; return all bytes and each call's output."""
    sizes = np.random.default_rng(seed).integers(1, 2400, size=audio.size)
    bounds = np.cumsum(sizes)[np.cumsum(sizes) < audio.size]
    encoder = StreamEncoder(fmt, rate)
    outputs = [encoder.encode(chunk) for chunk in np.split(audio, bounds)]
    outputs.append(encoder.finish())
    return b"".join(outputs), outputs


def _check_decoded(samples: np.ndarray, decoded_rate: int, fmt: AudioFormat, rate: int, slack: int) -> None:
    expected = int(_SECONDS * rate)
    assert decoded_rate == rate
    assert expected <= samples.size <= expected + slack
    # the tone survived: the spectral peak is at 440 Hz and the level mid-signal (past codec delays) is right
    peak_hz = np.argmax(np.abs(np.fft.rfft(samples))) * rate / samples.size
    assert abs(peak_hz - _TONE_HZ) <= rate / samples.size
    middle = samples[samples.size // 4 : 3 * samples.size // 4]
    assert np.sqrt(np.mean(middle**2)) == pytest.approx(_AMPLITUDE / np.sqrt(2), rel=0.1)


def _slack(fmt: AudioFormat, whole: bool) -> int:
    if fmt is AudioFormat.AAC:
        return _AAC_SLACK
    if fmt is AudioFormat.MP3 and not whole:
        return _MP3_STREAM_SLACK
    return 0


@pytest.mark.parametrize(("fmt", "rate"), _cases())
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "streamed"])
def test_every_format_decodes_back_to_its_duration_rate_and_tone(
    fmt: AudioFormat, rate: int, whole: bool
) -> None:
    audio = _tone(int(_SECONDS * SAMPLE_RATE))
    data = encode_whole(audio, fmt, rate) if whole else _stream(fmt, rate, audio)[0]
    slack = _slack(fmt, whole)

    samples, decoded_rate = _decode_av(data, fmt, rate)
    if fmt is AudioFormat.OPUS:
        assert decoded_rate == 48000
        samples, decoded_rate = resample(samples.astype(np.float32), decoded_rate, rate), rate
    _check_decoded(samples, decoded_rate, fmt, rate, slack)
    if fmt is not AudioFormat.AAC and (whole or fmt is not AudioFormat.FLAC):
        _check_decoded(*_decode_soundfile(data, fmt, rate), fmt, rate, slack)


@pytest.mark.parametrize("rate", SUPPORTED_SAMPLE_RATES)
@pytest.mark.parametrize("fmt", sorted(_LOSSLESS))
def test_lossless_formats_carry_exactly_the_pcm16_samples(fmt: AudioFormat, rate: int) -> None:
    audio = _tone(int(_SECONDS * SAMPLE_RATE))
    expected = to_int16(resample(audio, SAMPLE_RATE, rate))
    for data in (encode_whole(audio, fmt, rate), _stream(fmt, rate, audio)[0]):
        samples, _ = _decode_av(data, fmt, rate)
        # streamed resampling may round a sample to the neighbouring step
        assert np.abs(np.rint(samples * 32768) - expected).max() <= 1


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_streamed_bytes_leave_before_finish(fmt: AudioFormat) -> None:
    """Fed 100 ms at a time, almost all of one second's bytes are out before `finish()` is called."""
    audio = _tone(SAMPLE_RATE)
    encoder = StreamEncoder(fmt)
    early = [encoder.encode(chunk) for chunk in np.split(audio, 10)]
    tail = encoder.finish()
    assert all(early[2:])
    assert len(tail) < 0.15 * sum(map(len, [*early, tail]))


def test_streamed_wav_header_says_length_unknown_and_decoders_accept_it() -> None:
    first = StreamEncoder(AudioFormat.WAV, 16000).encode(_tone(2400))
    riff, riff_size, wave, fmt_id, fmt_size, tag, channels, rate, byte_rate, align, bits = struct.unpack(
        "<4sI4s4sIHHIIHH", first[:36]
    )
    data_id, data_size = struct.unpack("<4sI", first[36:44])
    assert (riff, wave, fmt_id, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert riff_size == data_size == 0xFFFFFFFF
    assert (fmt_size, tag, channels, rate, byte_rate, align, bits) == (16, 1, 1, 16000, 32000, 2, 16)
    # audio follows the header at once (less the resampler's few ms of filter delay), and decoders read
    # as much of it as has arrived
    assert 44 + 2 * 1400 < len(first) <= 44 + 2 * 1600
    assert _decode_soundfile(first, AudioFormat.WAV, 16000)[0].size == (len(first) - 44) // 2
    assert _decode_av(first, AudioFormat.WAV, 16000)[0].size == (len(first) - 44) // 2


def test_whole_wav_header_carries_the_real_sizes() -> None:
    data = encode_whole(_tone(2400), AudioFormat.WAV, 16000)
    riff_size, data_size = struct.unpack("<I", data[4:8])[0], struct.unpack("<I", data[40:44])[0]
    assert len(data) == 44 + 2 * 1600
    assert riff_size == len(data) - 8
    assert data_size == 2 * 1600


@pytest.mark.parametrize("rate", SUPPORTED_SAMPLE_RATES)
def test_a_whole_wav_is_the_same_to_the_byte_as_ffmpegs(rate: int) -> None:
    """Whole WAV files are written without FFmpeg: only right while FFmpeg would write the same bytes."""
    samples = resample(_tone(2400), SAMPLE_RATE, rate)
    file = io.BytesIO()
    muxer = Muxer(AudioFormat.WAV, rate, file)
    muxer.write(samples)
    muxer.close()
    assert encode_whole(_tone(2400), AudioFormat.WAV, rate) == file.getvalue()


def test_whole_flac_and_mp3_headers_let_decoders_return_the_exact_length() -> None:
    audio = _tone(SAMPLE_RATE)
    assert sf.info(io.BytesIO(encode_whole(audio, AudioFormat.FLAC))).frames == SAMPLE_RATE
    assert _decode_soundfile(encode_whole(audio, AudioFormat.MP3), AudioFormat.MP3, SAMPLE_RATE)[0].size == (
        SAMPLE_RATE
    )


@pytest.mark.parametrize("rate", SUPPORTED_SAMPLE_RATES)
@pytest.mark.parametrize("fmt", sorted(_RAW))
def test_a_cut_returns_every_sample_of_a_raw_format_so_far(fmt: AudioFormat, rate: int) -> None:
    """A segment's bytes are all out at its end: the samples so far, to the sample, and nothing held."""
    encoder = StreamEncoder(fmt, rate)
    audio = _tone(int(_SECONDS * SAMPLE_RATE))
    sent, taken = b"", 0
    for segment in np.split(audio, [4801, 4802, 9000]):  # odd lengths: fractions of a sample at 22.05 kHz
        sent += encoder.encode(segment[:100]) + encoder.encode(segment[100:]) + encoder.cut()
        taken += segment.size
        assert len(_decode_soundfile(sent, fmt, rate)[0]) == output_samples(taken, SAMPLE_RATE, rate)
        assert encoder.samples == output_samples(taken, SAMPLE_RATE, rate)
    assert encoder.finish() == b""


@pytest.mark.parametrize("rate", [16000, SAMPLE_RATE])
def test_a_flac_body_is_one_file_soundfile_and_pyav_read_to_the_sample(rate: int) -> None:
    """A body that streams FLAC gets the whole file at the end, its length in its header: libsndfile cannot
    read a streamed one (length "unknown")."""
    audio = _tone(int(_SECONDS * SAMPLE_RATE))
    encoder = body_encoder(AudioFormat.FLAC, rate)
    assert [encoder.encode(chunk) for chunk in np.split(audio, [100, 7000])] == [b"", b"", b""]
    data = encoder.finish()
    expected = to_int16(resample(audio, SAMPLE_RATE, rate))
    for samples, decoded_rate in (
        _decode_soundfile(data, AudioFormat.FLAC, rate),
        _decode_av(data, AudioFormat.FLAC, rate),
    ):
        assert decoded_rate == rate
        assert np.array_equal(np.rint(samples * 32768).astype(np.int16), expected)
    assert encoder.finish() == b""
    with pytest.raises(ValueError, match=r"after finish"):
        encoder.encode(audio)
    assert isinstance(body_encoder(AudioFormat.MP3, rate), StreamEncoder)


# What FFmpeg writes for a stream without audio: raw formats and ADTS nothing; WAV and FLAC a header that
# decoders read as zero samples; Ogg its two Opus header pages and MP3 a lone "Info" frame (when seekable),
# which FFmpeg and libsndfile refuse to open for lack of audio.
_EMPTY_MAGIC = {AudioFormat.OPUS: b"OpusTags", AudioFormat.MP3: b"Info"}


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_empty_input_gives_a_stream_without_audio(fmt: AudioFormat) -> None:
    empty = np.zeros(0, dtype=np.float32)
    encoder = StreamEncoder(fmt)
    assert encoder.encode(empty) == b""
    for data in (encoder.finish(), encode_whole(empty, fmt)):
        if fmt in (AudioFormat.WAV, AudioFormat.FLAC):
            assert _decode_av(data, fmt, SAMPLE_RATE)[0].size == 0
        elif fmt in _EMPTY_MAGIC and data:
            assert _EMPTY_MAGIC[fmt] in data
            assert len(data) < 200
        else:
            assert data == b""


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_finish_is_idempotent_and_closes_the_encoder(fmt: AudioFormat) -> None:
    encoder = StreamEncoder(fmt, 16000 if fmt is not AudioFormat.PCM else SAMPLE_RATE)
    body = encoder.encode(_tone(4800))
    assert body + encoder.finish()
    assert encoder.finish() == b""
    with pytest.raises(ValueError, match=r"after finish"):
        encoder.encode(_tone(10))
    with pytest.raises(ValueError, match=r"after finish"):
        encoder.cut()


@pytest.mark.parametrize(
    ("fmt", "rate", "message"),
    [
        ("ogg", SAMPLE_RATE, "format must be one of pcm, wav, mp3, opus, flac, aac, mulaw, alaw"),
        ("opus", 44100, "sample_rate for opus must be one of 8000, 16000, 24000, 48000 Hz; got 44100"),
        ("wav", 11025, "sample_rate for wav must be one of 8000, 16000, 22050, 24000, 44100, 48000 Hz"),
    ],
)
def test_invalid_format_or_rate_is_a_config_error(fmt: str, rate: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        StreamEncoder(fmt, rate)
    with pytest.raises(ConfigError, match=message):
        encode_whole(_tone(100), fmt, rate)


def test_non_mono_input_is_refused() -> None:
    stereo = np.zeros((2, 100), dtype=np.float32)
    with pytest.raises(ValueError, match=r"expected mono audio \(a 1-D array\); got shape \(2, 100\)"):
        StreamEncoder(AudioFormat.PCM).encode(stereo)
    with pytest.raises(ValueError, match=r"1-D"):
        encode_whole(stereo, AudioFormat.WAV)
