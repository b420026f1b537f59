"""Kokoro's 24 kHz float32 audio → the bytes of any `AudioFormat`, streamed or as one file.

FFmpeg (PyAV, :mod:`koe.audio.muxer`) encodes every container but one: a whole WAV file is 44 bytes of
header before the PCM, which the standard library's ``wave`` writes the same to the byte (tested), and
importing PyAV would add to the start of ``koe say -o hi.wav``. So the muxer is imported where it is used.
"""

from __future__ import annotations

import io
import wave

import numpy as np

from koe.audio.formats import AudioFormat, check_sample_rate, parse_format
from koe.audio.pcm import to_pcm16
from koe.audio.resample import StreamResampler, resample
from koe.types import SAMPLE_RATE, Audio


class _Drain:
    """A write-only sink (so FFmpeg writes streaming headers) whose bytes are taken after each call."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def write(self, data: bytes, /) -> int:
        self._buffer += data
        return len(data)

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def _as_mono(chunk: Audio) -> Audio:
    samples = np.asarray(chunk, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"expected mono audio (a 1-D array); got shape {samples.shape}")
    return samples


class StreamEncoder:
    """Encodes one stream of Kokoro audio chunk by chunk, returning bytes as soon as the codec has them.

    Input is always 24 kHz float32 mono; when `sample_rate` differs, a `StreamResampler` converts it
    with state kept across chunks. Concatenating every `encode()`, `cut()` and `finish()` result
    gives one valid stream (WAV with the 0xFFFFFFFF "unknown length" sizes, FLAC with length
    "unknown"). Synchronous and cheap per call; dropping an encoder without `finish()` is safe.

    Args:
        fmt: output format (an `AudioFormat` or a name `parse_format` accepts).
        sample_rate: output rate in Hz, one of `SUPPORTED_SAMPLE_RATES` (Opus: `OPUS_SAMPLE_RATES`).

    Raises:
        ConfigError: unknown format or a rate the format cannot use.
    """

    def __init__(self, fmt: AudioFormat | str, sample_rate: int = SAMPLE_RATE) -> None:
        self.format = parse_format(fmt)
        self.sample_rate = check_sample_rate(self.format, sample_rate)
        self._resampler = StreamResampler(SAMPLE_RATE, sample_rate)
        self._sink = _Drain()
        self._muxer = None
        if self.format is not AudioFormat.PCM:
            from koe.audio.muxer import Muxer

            self._muxer = Muxer(self.format, sample_rate, self._sink)
        self._samples = 0
        self._finished = False

    @property
    def samples(self) -> int:
        """Samples at `sample_rate` handed to the codec so far."""
        return self._samples

    def encode(self, chunk: Audio) -> bytes:
        """Feed the next chunk; returns the bytes that are ready (b"" while the codec fills a frame).

        The first non-empty result of a container format starts with its header.

        Raises:
            ValueError: `chunk` is not 1-D, or the encoder is finished.
        """
        if self._finished:
            raise ValueError("StreamEncoder.encode() called after finish()")
        samples = _as_mono(chunk)
        if samples.size == 0:
            return b""
        return self._emit(self._resampler.process(samples))

    def cut(self) -> bytes:
        """End a segment: the resampler lets out the rest of the audio fed so far (see
        `StreamResampler.cut`), so `samples` is then `output_samples` of it and, for the raw formats (PCM,
        G.711), every byte of it has been returned. A codec that frames its output may still hold part of a
        frame. Call it where the audio is silent, as segments join.

        Raises:
            ValueError: the encoder is finished.
        """
        if self._finished:
            raise ValueError("StreamEncoder.cut() called after finish()")
        return self._emit(self._resampler.cut())

    def finish(self) -> bytes:
        """Flush the resampler and the codec and end the stream; later calls return b""."""
        if self._finished:
            return b""
        self._finished = True
        data = self._emit(self._resampler.flush())
        if self._muxer is None:
            return data
        self._muxer.close()
        return data + self._sink.take()

    def _emit(self, samples: Audio) -> bytes:
        self._samples += samples.size
        if self._muxer is None:
            return to_pcm16(samples)
        self._muxer.write(samples)
        return self._sink.take()


#: Formats an HTTP body carries as one complete file even when it streams: a streamed FLAC's STREAMINFO says
#: "total samples unknown" (valid FLAC), which libsndfile takes as 2^63 - 1 frames, so `soundfile.read` fails
#: ("array is too big") on the file a client saved. FFmpeg and libFLAC read either.
FILE_FORMATS = frozenset({AudioFormat.FLAC})


class FileEncoder:
    """`StreamEncoder`'s calls for a format sent whole (`FILE_FORMATS`): `encode()` keeps the audio and
    returns b"", `finish()` returns the complete file (`encode_whole`), whose header holds the length.

    Raises:
        ConfigError: unknown format or a rate the format cannot use.
    """

    def __init__(self, fmt: AudioFormat | str, sample_rate: int = SAMPLE_RATE) -> None:
        self.format = parse_format(fmt)
        self.sample_rate = check_sample_rate(self.format, sample_rate)
        self._pieces: list[Audio] = []
        self._finished = False

    def encode(self, chunk: Audio) -> bytes:
        """Keep the next chunk; nothing is ready before `finish()`.

        Raises:
            ValueError: `chunk` is not 1-D, or the encoder is finished.
        """
        if self._finished:
            raise ValueError("FileEncoder.encode() called after finish()")
        self._pieces.append(_as_mono(chunk))
        return b""

    def finish(self) -> bytes:
        """The whole file; later calls return b""."""
        if self._finished:
            return b""
        self._finished = True
        audio = np.concatenate(self._pieces) if self._pieces else np.zeros(0, dtype=np.float32)
        self._pieces.clear()
        return encode_whole(audio, self.format, self.sample_rate)


def body_encoder(fmt: AudioFormat, sample_rate: int) -> StreamEncoder | FileEncoder:
    """The encoder for an HTTP body that streams: a `StreamEncoder`, or a `FileEncoder` for `FILE_FORMATS`.

    Raises:
        ConfigError: a rate the format cannot use.
    """
    if fmt in FILE_FORMATS:
        return FileEncoder(fmt, sample_rate)
    return StreamEncoder(fmt, sample_rate)


def encode_whole(audio: Audio, fmt: AudioFormat | str, sample_rate: int = SAMPLE_RATE) -> bytes:
    """Encode a complete 24 kHz signal as one file whose headers carry the real length.

    WAV gets its true RIFF/data sizes, FLAC its total sample count and MD5, MP3 a Xing/LAME frame
    that lets decoders trim the encoder delay exactly.

    Raises:
        ConfigError: unknown format or a rate the format cannot use.
        ValueError: `audio` is not 1-D.
    """
    out_format = parse_format(fmt)
    rate = check_sample_rate(out_format, sample_rate)
    samples = resample(_as_mono(audio), SAMPLE_RATE, rate)
    if out_format is AudioFormat.PCM:
        return to_pcm16(samples)
    file = io.BytesIO()
    if out_format is AudioFormat.WAV:
        with wave.open(file, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(rate)
            wav.writeframes(to_pcm16(samples))
        return file.getvalue()
    from koe.audio.muxer import Muxer

    muxer = Muxer(out_format, rate, file)
    muxer.write(samples)
    muxer.close()
    return file.getvalue()
