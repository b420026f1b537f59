"""The OpenAI-compatible speech API, driven by the official ``openai`` SDK against a live server."""

from __future__ import annotations

import io
from collections.abc import Iterator

import av
import httpx
import openai
import pytest

from live_server import LiveServer


@pytest.fixture
def client(koe_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=koe_server.http_url + "/v1", api_key="unused", timeout=120, max_retries=0
    ) as sdk:
        yield sdk


def test_pcm_streams_raw_24khz_s16le(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Hello from the OpenAI client.", response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        pcm = b"".join(response.iter_bytes())
    assert len(pcm) % 2 == 0
    assert len(pcm) / (24_000 * 2) > 1.0  # about two seconds of speech


def test_mp3_decodes_to_speech_of_the_expected_length(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="af_bella(2)+af_sky(1)",
        input="Blended voices work too.",
        response_format="mp3",
        speed=1.2,
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        mp3 = response.read()
    with av.open(io.BytesIO(mp3)) as container:
        frames = [frame for frame in container.decode(audio=0)]
    seconds = sum(frame.samples for frame in frames) / frames[0].sample_rate
    assert 0.8 < seconds < 4.0


def test_bad_requests_raise_the_sdk_error_with_koe_code(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as unknown_voice:
        client.audio.speech.create(model="tts-1", voice="zz_nobody", input="Hi.")
    assert unknown_voice.value.code == "unknown_voice"
    assert "af_heart" in unknown_voice.value.message
    with pytest.raises(openai.BadRequestError, match="speed"):
        client.audio.speech.create(model="tts-1", voice="nova", input="Hi.", speed=4.0)
    with pytest.raises(openai.BadRequestError, match="format"):
        client.audio.speech.create(model="tts-1", voice="nova", input="Hi.", response_format="ogg")  # type: ignore[arg-type]


def test_sse_stream_format_sends_base64_audio_events(koe_server: LiveServer) -> None:
    body = {
        "model": "kokoro",
        "voice": "echo",
        "input": "Events.",
        "response_format": "pcm",
        "stream_format": "sse",
    }
    response = httpx.post(koe_server.http_url + "/v1/audio/speech", json=body, timeout=120)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line for line in response.text.splitlines() if line.startswith("data: ")]
    assert '"speech.audio.delta"' in events[0]
    assert events[-1] == 'data: {"type": "speech.audio.done"}'


def test_models_and_voices_are_listed(client: openai.OpenAI, koe_server: LiveServer) -> None:
    assert {m.id for m in client.models.list()} >= {"kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"}
    voices = httpx.get(koe_server.http_url + "/v1/audio/voices").json()
    names = {v["id"] for v in voices["voices"]}
    assert {"af_heart", "bm_fable", "am_onyx"} <= names
    assert voices["aliases"]["shimmer"] == "af_sky"
    assert set(voices["aliases"].values()) <= names
