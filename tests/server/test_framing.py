"""Each segment's audio over ``/v1/stream`` at every rate: all of its bytes arrive between its ``segment`` and
its ``segment_end``, as many samples as ``duration_s`` says, and the turn's samples are the 24 kHz turn's,
resampled, to the sample. On the fake engine; the audio is decoded with soundfile."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest
import soundfile as sf
from websockets.asyncio.client import connect

from koe.audio.resample import output_samples, resample
from koe.types import SAMPLE_RATE
from live_server import LiveServer, ServerFactory
from ws_events import Event, run, send, until

#: Three lines: a line break always ends a segment, so every run of the turn has the same three.
TEXT = "Hello there, how are you doing?\nI am fine today.\nAnd what about you, my friend?"
#: soundfile's name for each stream format's raw samples, and their width in bytes.
_SUBTYPES = {"pcm_s16le": ("PCM_16", 2), "mulaw": ("ULAW", 1)}
#: How closely the turn at another rate follows the 24 kHz turn resampled in one piece (μ-law keeps ~1/16
#: of each sample's size; a segment at 22.05 kHz starts on the nearest whole sample).
MIN_CORRELATION = 0.99


@pytest.fixture(scope="module")
def live(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """The first segment decoded whole: windowing it would take the next lines into it."""
    with serve_fake(windowed_first=False) as server:
        yield server


@dataclass(frozen=True)
class Segment:
    index: int
    duration_s: float
    audio: bytes


def segments(events: list[Event]) -> tuple[list[Segment], float]:
    """Each segment with the audio that came between its ``segment`` and ``segment_end`` (no audio may come
    outside a segment), and the ``flushed`` total."""
    found: list[Segment] = []
    open_index: int | None = None
    audio = b""
    for event in events:
        if isinstance(event, bytes):
            assert open_index is not None, "audio outside a segment"
            audio += event
        elif event["type"] == "segment":
            assert open_index is None, event
            open_index, audio = event["index"], b""
        elif event["type"] == "segment_end":
            assert event["index"] == open_index, event
            found.append(Segment(open_index, event["duration_s"], audio))
            open_index = None
    assert open_index is None and events[-1]["type"] == "flushed"  # type: ignore[index]
    return found, events[-1]["audio_s"]  # type: ignore[index]


async def _turn(live: LiveServer, rate: int, fmt: str) -> list[Event]:
    async with connect(f"{live.ws_url}/v1/stream?sample_rate={rate}&format={fmt}") as ws:
        await send(ws, {"type": "append", "text": TEXT})
        await send(ws, {"type": "flush"})
        return await until(ws, lambda message: message.get("type") == "flushed")


def _decode(data: bytes, rate: int, fmt: str) -> npt.NDArray[np.float64]:
    subtype, _ = _SUBTYPES[fmt]
    samples, _ = sf.read(io.BytesIO(data), format="RAW", subtype=subtype, samplerate=rate, channels=1)
    return np.asarray(samples)


@pytest.mark.parametrize(
    ("rate", "fmt"),
    [(8000, "mulaw"), (16000, "pcm_s16le"), (22050, "pcm_s16le"), (24000, "pcm_s16le"), (48000, "pcm_s16le")],
)
def test_each_segments_audio_comes_between_its_start_and_end_and_lasts_its_duration(
    live: LiveServer, rate: int, fmt: str
) -> None:
    reference, _ = segments(run(lambda: _turn(live, SAMPLE_RATE, "pcm_s16le")))
    found, audio_s = segments(run(lambda: _turn(live, rate, fmt)))
    width = _SUBTYPES[fmt][1]

    assert [s.index for s in found] == [s.index for s in reference] == [0, 1, 2]
    for segment in found:
        assert len(segment.audio) == round(segment.duration_s * rate) * width
    # segment by segment, the 24 kHz turn's samples so far at this rate: no drift, however many segments
    so_far_24k = np.cumsum([len(s.audio) // 2 for s in reference])
    so_far = np.cumsum([len(s.audio) // width for s in found])
    assert so_far.tolist() == [output_samples(int(n), SAMPLE_RATE, rate) for n in so_far_24k]
    assert round(audio_s * rate) == so_far[-1]
    # and it is the same audio
    heard = _decode(b"".join(s.audio for s in found), rate, fmt)
    at_24k = _decode(b"".join(s.audio for s in reference), SAMPLE_RATE, "pcm_s16le")
    expected = resample(at_24k.astype(np.float32), SAMPLE_RATE, rate)
    assert heard.size == expected.size
    assert float(np.corrcoef(heard, expected)[0, 1]) > MIN_CORRELATION
