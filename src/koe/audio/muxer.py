"""One PyAV (FFmpeg) encoder plus container per output stream, writing into a caller-owned sink.

Whether the sink can seek decides the header style, exactly as FFmpeg does for files vs pipes: a
write-only sink gets streaming headers (WAV sizes 0xFFFFFFFF, FLAC total length "unknown", no MP3
Xing/LAME frame), a seekable one (``io.BytesIO``) gets headers rewritten with the real length at close.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, cast

import av
import numpy as np
from av.audio.stream import AudioStream

from koe.audio.formats import AudioFormat
from koe.audio.pcm import to_int16
from koe.types import Audio


class Sink(Protocol):
    """Where FFmpeg writes bytes; give it ``seek``/``tell`` too to get length-bearing headers."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class _Codec:
    container: str
    codec: str
    #: sample format handed to the encoder: "s16" frames come from `to_int16` (same clipping as `pcm`);
    #: float ones are the samples as they are ("flt" and mono "fltp" share one memory layout).
    sample_format: str
    bit_rate: int = 0  # 0: lossless or fixed-rate codec, FFmpeg ignores it
    container_options: dict[str, str] = field(default_factory=dict)


# Speech-friendly bitrates: transparent for a mono voice, and legal at every supported rate.
_MP3_BIT_RATE = 64_000
_AAC_BIT_RATE = 64_000
_OPUS_BIT_RATE = 32_000
# Ogg holds packets until a page's duration is reached: one 20 ms Opus packet per page sends audio as soon as
# the codec emits it, for ~28 bytes of page header each (FFmpeg's default would hold up to 1 s).
_OGG_PAGE_DURATION_US = 20_000

_CODECS: dict[AudioFormat, _Codec] = {
    AudioFormat.WAV: _Codec("wav", "pcm_s16le", "s16"),
    AudioFormat.MP3: _Codec("mp3", "libmp3lame", "fltp", _MP3_BIT_RATE, {"id3v2_version": "0"}),
    AudioFormat.OPUS: _Codec(
        "ogg", "libopus", "flt", _OPUS_BIT_RATE, {"page_duration": str(_OGG_PAGE_DURATION_US)}
    ),
    # FFmpeg reserves 8 KiB of FLAC padding for later tag edits by default; a stream never gets edited.
    AudioFormat.FLAC: _Codec("flac", "flac", "s16", container_options={"metadata_header_padding": "0"}),
    AudioFormat.AAC: _Codec("adts", "aac", "fltp", _AAC_BIT_RATE),
    AudioFormat.MULAW: _Codec("mulaw", "pcm_mulaw", "s16"),
    AudioFormat.ALAW: _Codec("alaw", "pcm_alaw", "s16"),
}
# No "Lavf…" encoder tags: the same audio always gives the same bytes.
_COMMON_CONTAINER_OPTIONS = {"fflags": "+bitexact"}


class Muxer:
    """Encodes float32 mono samples into `fmt` and writes the container bytes to `sink`.

    The encoder's state lives as long as the muxer, so chunk joins cost nothing. Opening is cheap
    (about a millisecond); the container header is written at once, so the first bytes a client
    gets start the file. Not thread-safe; one per stream.
    """

    def __init__(self, fmt: AudioFormat, sample_rate: int, sink: Sink) -> None:
        spec = _CODECS[fmt]
        self._sample_rate = sample_rate
        self._sample_format = spec.sample_format
        self._time_base = Fraction(1, sample_rate)
        self._pts = 0
        self._container = av.open(
            sink,
            mode="w",
            format=spec.container,
            container_options={**_COMMON_CONTAINER_OPTIONS, **spec.container_options},
        )
        # add_stream's return type is only narrowed for literal codec names; these are all audio codecs.
        self._stream = cast(AudioStream, self._container.add_stream(spec.codec, rate=sample_rate))
        self._stream.layout = "mono"
        self._stream.format = spec.sample_format
        if spec.bit_rate:
            self._stream.bit_rate = spec.bit_rate
        self._container.start_encoding()

    def write(self, samples: Audio) -> None:
        """Encode `samples` (at the muxer's rate); finished packets go to the sink at once."""
        if samples.size == 0:
            return
        data = to_int16(samples) if self._sample_format == "s16" else np.ascontiguousarray(samples)
        frame = av.AudioFrame.from_ndarray(data.reshape(1, -1), format=self._sample_format, layout="mono")
        frame.sample_rate = self._sample_rate
        frame.time_base = self._time_base
        frame.pts = self._pts
        self._pts += samples.size
        self._container.mux(self._stream.encode(frame))

    def close(self) -> None:
        """Drain the encoder (its look-ahead and last partial frame) and write the trailer."""
        self._container.mux(self._stream.encode(None))
        self._container.close()
