"""The OpenAI-compatible speech API, driven by the official ``openai`` SDK against a live server."""

from __future__ import annotations

import io
from collections.abc import Iterator

import av
import httpx
import numpy as np
import numpy.typing as npt
import openai
import pytest

from koe.audio.pcm import to_int16
from koe.engine.voices import VOICES
from koe.pipeline.speech import Speech
from live_server import LiveServer
from support.fake import fake_speech

BLEND = "af_bella(2)+af_sky(1)"
BLEND_TEXT = "Blended voices work too."
SPEED = 1.2
#: How far the streamed audio of one sentence, from its first sound, may be from a direct synthesis's.
PCM_SLACK_SAMPLES = 600
#: A sample this loud (−40 dBFS) is speech: before it, a segment's lead silence (a streamed first segment
#: decoded in windows keeps all of it, a whole decode its last frames).
SPEECH_LEVEL = 328
#: Encoder priming and the last frame's padding.
MP3_SLACK_S = 0.1


@pytest.fixture
def client(koe_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=koe_server.http_url + "/v1", api_key="unused", timeout=120, max_retries=0
    ) as sdk:
        yield sdk


def pcm_of(client: openai.OpenAI, text: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.int16]:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=voice, input=text, response_format="pcm", speed=speed
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        return np.frombuffer(response.read(), dtype="<i2")


def from_onset(pcm: npt.NDArray[np.int16]) -> npt.NDArray[np.int16]:
    """``pcm`` from its first sound on."""
    return pcm[int(np.flatnonzero(np.abs(pcm.astype(np.int32)) >= SPEECH_LEVEL)[0]) :]


def voiced_samples(pcm: npt.NDArray[np.int16]) -> int:
    """Samples from ``pcm``'s first sound to its last: what speed scales (the silence kept at a segment's
    edges is a fixed few frames)."""
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) >= SPEECH_LEVEL)
    return int(loud[-1] - loud[0])


def test_pcm_streams_raw_24khz_s16le_of_the_aliased_voice(client: openai.OpenAI, speech: Speech) -> None:
    text = "Hello from the OpenAI client."
    pcm = pcm_of(client, text, "alloy")
    direct = to_int16(speech.synthesize(text, voice="af_alloy"))  # alloy's voice (GET /v1/audio/voices)
    assert len(from_onset(pcm)) == pytest.approx(len(from_onset(direct)), abs=PCM_SLACK_SAMPLES)


def test_speed_shortens_the_audio_by_its_factor(client: openai.OpenAI) -> None:
    text = "Speed changes how long this sentence lasts."
    normal, fast = pcm_of(client, text, BLEND), pcm_of(client, text, BLEND, speed=SPEED)
    # Kokoro rounds each token's frames at the new speed, so a short sentence is not exactly 1/1.2 as long
    assert voiced_samples(fast) / voiced_samples(normal) == pytest.approx(1 / SPEED, rel=0.07)


def test_a_blend_speaks_the_averaged_style_not_either_voice(fake_server: LiveServer) -> None:
    """On the fake engine, whose level follows the style: exactly the direct synthesis of the blend."""
    with openai.OpenAI(
        base_url=fake_server.http_url + "/v1", api_key="unused", timeout=120, max_retries=0
    ) as sdk:
        blend = pcm_of(sdk, BLEND_TEXT, BLEND, speed=SPEED)
        alone = [pcm_of(sdk, BLEND_TEXT, voice, speed=SPEED) for voice in ("af_bella", "af_sky")]
    direct = to_int16(fake_speech().synthesize(BLEND_TEXT, voice=BLEND, speed=SPEED))
    assert np.array_equal(blend, direct)
    assert all(len(a) == len(blend) and not np.array_equal(a, blend) for a in alone)
    # the fake's loudness is 0.1 + 0.4 x the style's level; each fake voice's level is its rank / 54
    bella, sky = ((VOICES.index(v) + 1) / len(VOICES) for v in ("af_bella", "af_sky"))
    averaged = 0.1 + 0.4 * (2 * bella + sky) / 3
    assert np.abs(blend).max() / 32767 == pytest.approx(averaged, abs=0.002)


def test_mp3_decodes_to_the_length_of_the_same_pcm(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice=BLEND, input=BLEND_TEXT, response_format="mp3", speed=SPEED
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        mp3 = response.read()
    with av.open(io.BytesIO(mp3)) as container:
        frames = [frame for frame in container.decode(audio=0)]
    assert {frame.sample_rate for frame in frames} == {24000}
    seconds = sum(frame.samples for frame in frames) / 24000
    pcm_s = len(pcm_of(client, BLEND_TEXT, BLEND, speed=SPEED)) / 24000
    assert pcm_s <= seconds <= pcm_s + MP3_SLACK_S


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
