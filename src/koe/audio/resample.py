"""Resampling from Kokoro's 24 kHz to the rate a client asked for, one-shot or chunk by chunk (soxr)."""

from __future__ import annotations

import numpy as np
import soxr

from koe.types import Audio

# soxr's default: 20-bit precision with a steep filter, at a cost negligible beside synthesis.
_QUALITY = "HQ"


def resample(audio: Audio, in_rate: int, out_rate: int) -> Audio:
    """Resample a complete signal in one call (same filter as `StreamResampler`)."""
    if in_rate == out_rate:
        return audio
    out: Audio = soxr.resample(np.ascontiguousarray(audio, dtype=np.float32), in_rate, out_rate, _QUALITY)
    return out


def output_samples(samples: int, in_rate: int, out_rate: int) -> int:
    """How many samples ``samples`` input samples make at ``out_rate``: the nearest whole number (half up)."""
    return (2 * samples * out_rate + in_rate) // (2 * in_rate)


class StreamResampler:
    """Resamples a stream that arrives in chunks, keeping filter state across them.

    Chunk joins are therefore seamless: the concatenated output equals resampling the whole signal
    at once. soxr holds back a few milliseconds of output (its filter delay) until more input,
    `cut()` or `flush()` arrives. Not thread-safe; one per stream.
    """

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream = None if in_rate == out_rate else self._new_stream()
        self._taken = 0  # input samples so far
        self._given = 0  # output samples so far
        self._flushed = False

    def process(self, chunk: Audio) -> Audio:
        """Resample the next chunk; returns whatever output is ready (may be empty).

        Raises:
            ValueError: called after `flush()`, like writing to a closed file.
        """
        if self._flushed:
            raise ValueError("StreamResampler.process() called after flush()")
        if self._stream is None:
            return chunk
        out: Audio = self._stream.resample_chunk(np.ascontiguousarray(chunk, dtype=np.float32))
        self._taken += chunk.size
        self._given += out.size
        return out

    def cut(self) -> Audio:
        """Return the held-back tail, so that the output so far is the input so far to the sample, and go on
        with a fresh filter.

        A segment's audio then ends with its last sample rather than a filter delay into the next one.
        The output so far always holds `output_samples` of the input so far (soxr's tail can differ by a
        sample of its decay, which is dropped or padded with silence). The fresh filter does not see the
        audio before the cut, nor the old one the audio after it: cut where the signal is silent, as
        segments join (:mod:`koe.pipeline.seams`), or the join clicks.

        Raises:
            ValueError: called after `flush()`.
        """
        if self._flushed:
            raise ValueError("StreamResampler.cut() called after flush()")
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        tail: Audio = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self._stream = self._new_stream()
        due = output_samples(self._taken, self.in_rate, self.out_rate) - self._given
        self._given += due
        return np.pad(tail[:due], (0, max(0, due - tail.size)))

    def flush(self) -> Audio:
        """Return the held-back tail (as `cut` does) and end the stream; a second call returns nothing."""
        if self._flushed:
            return np.zeros(0, dtype=np.float32)
        tail = self.cut()
        self._flushed = True
        return tail

    def _new_stream(self) -> soxr.ResampleStream:
        return soxr.ResampleStream(self.in_rate, self.out_rate, 1, "float32", _QUALITY)
