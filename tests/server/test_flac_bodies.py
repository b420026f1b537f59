"""FLAC in every HTTP body that streams — ``/invocations`` (streamed by default), its SSE transport, and
OpenAI's SSE — is a file soundfile (libsndfile) and PyAV (FFmpeg) both read, holding exactly the samples
of the PCM answer to the same text: FLAC is lossless. On the fake engine."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator

import av
import httpx
import numpy as np
import numpy.typing as npt
import pytest
import soundfile as sf

from live_server import LiveServer, ServerFactory
from sse_events import sse_events
from ws_events import WAIT_S

#: Two lines: a line break always ends a segment, so the FLAC and the PCM requests get the same segments.
TEXT = "Hello there.\nHow are you today?"
RATE = 24000


@pytest.fixture(scope="module")
def live(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """The first segment decoded whole: windowing it would take the next line into it."""
    with serve_fake(windowed_first=False) as server:
        yield server


def _post(live: LiveServer, path: str, body: dict[str, object]) -> httpx.Response:
    response = httpx.post(live.http_url + path, json=body, timeout=WAIT_S)
    assert response.status_code == 200, response.text
    return response


def _invocations(live: LiveServer, fmt: str) -> bytes:
    return _post(live, "/invocations", {"text": TEXT, "format": fmt}).content


def _invocations_sse(live: LiveServer, fmt: str) -> bytes:
    events = sse_events(_post(live, "/invocations", {"text": TEXT, "format": fmt, "transport": "sse"}))
    return b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "audio_chunk")


def _openai_sse(live: LiveServer, fmt: str) -> bytes:
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": fmt, "stream_format": "sse"}
    blocks = _post(live, "/v1/audio/speech", body).text.split("\n\n")
    events = [json.loads(block.removeprefix("data: ")) for block in blocks if block]
    assert events[-1] == {"type": "speech.audio.done"}
    return b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")


def _soundfile(data: bytes) -> npt.NDArray[np.int16]:
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE
    return np.asarray(samples)


def _pyav(data: bytes) -> npt.NDArray[np.int16]:
    with av.open(io.BytesIO(data), format="flac") as container:
        frames = list(container.decode(audio=0))
    assert {frame.sample_rate for frame in frames} == {RATE}
    return np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames]).astype(np.int16)


@pytest.mark.parametrize(
    "speak",
    [_invocations, _invocations_sse, _openai_sse],
    ids=["/invocations", "/invocations SSE", "OpenAI SSE"],
)
def test_streamed_flac_is_a_file_soundfile_and_pyav_read_with_the_pcm_answers_samples(
    live: LiveServer, speak: Callable[[LiveServer, str], bytes]
) -> None:
    pcm = np.frombuffer(speak(live, "pcm"), dtype="<i2")
    flac = speak(live, "flac")
    assert pcm.size > RATE // 2
    for decoded in (_soundfile(flac), _pyav(flac)):
        assert decoded.size == pcm.size
        assert np.array_equal(decoded, pcm)
