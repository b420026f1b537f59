"""What the OpenAI SDK (and pipecat's and LiveKit's OpenAI services) see beyond the happy path: errors that
name their field, nulls that mean the default, a request id on every response, the voice-name setting and a
FLAC file soundfile reads. On the fake engine: the audio's length is known exactly."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import openai
import pytest
import soundfile as sf

from koe.errors import ConfigError
from koe.server.runtime import Runtime
from koe.settings import Settings
from live_server import LiveServer, ServerFactory
from support.fake import fake_seconds

TEXT = "Hello there."


@pytest.fixture
def client(fake_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake_server.http_url + "/v1", api_key="unused", max_retries=0) as sdk:
        yield sdk


@pytest.mark.parametrize(
    ("fields", "param", "says"),
    [
        ({"voice": "nova", "speed": 4.0}, "speed", "speed"),
        ({"voice": "nova", "response_format": "ogg"}, "response_format", "format"),
        ({"voice": ["nova"]}, "voice", "voice"),
        ({"voice": "nova", "input": 5}, "input", "input"),
        ({"voice": "nova", "input": "   "}, "input", "input"),
        ({"voice": "nova", "stream_format": "chunks"}, "stream_format", "stream_format"),
        ({"voice": "nova", "model": ""}, "model", "model"),
        ({"voice": "zz_nobody"}, "voice", "unknown voice 'zz_nobody'; valid voices: af_alloy"),
        ({"voice": "no_such_voice"}, "voice", "unknown voice 'no_such_voice'; valid voices: af_alloy"),
    ],
)
def test_a_refusal_names_its_field_as_param(
    client: openai.OpenAI, fields: dict[str, object], param: str, says: str
) -> None:
    body = {"model": "tts-1", "input": TEXT, **fields}
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.speech.create(**body)  # type: ignore[arg-type]
    assert refused.value.param == param
    assert says in refused.value.message


def test_null_optional_fields_mean_their_defaults(fake_server: LiveServer) -> None:
    nulls = {"speed": None, "response_format": None, "stream_format": None, "instructions": None}
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "timestamps": None}
    with_nulls = httpx.post(fake_server.http_url + "/v1/audio/speech", json={**body, **nulls})
    plain = httpx.post(fake_server.http_url + "/v1/audio/speech", json=body)
    assert with_nulls.status_code == 200, with_nulls.text
    assert with_nulls.headers["content-type"] == "audio/mpeg"  # the default format
    assert with_nulls.content == plain.content


def test_every_v1_response_carries_a_request_id_and_a_clients_own_is_echoed(fake_server: LiveServer) -> None:
    url = fake_server.http_url
    speech = httpx.post(url + "/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "nova"})
    refused = httpx.post(url + "/v1/audio/speech", json={"model": "tts-1", "input": TEXT, "voice": "zz_x"})
    models = httpx.get(url + "/v1/models", headers={"x-request-id": "client-7f3a"})
    assert len(speech.headers["x-request-id"]) == 32 and len(refused.headers["x-request-id"]) == 32
    assert speech.headers["x-request-id"] != refused.headers["x-request-id"]
    assert models.headers["x-request-id"] == "client-7f3a"
    assert "x-request-id" not in httpx.get(url + "/ping").headers  # only the /v1/ routes


def test_the_sdk_reads_the_request_id(client: openai.OpenAI) -> None:
    response = client.audio.speech.with_raw_response.create(model="tts-1", input=TEXT, voice="nova")
    assert response.request_id is not None and len(response.request_id) == 32


def test_flac_is_one_complete_file_that_soundfile_reads_at_its_length(client: openai.OpenAI) -> None:
    flac = client.audio.speech.create(model="tts-1", input=TEXT, voice="nova", response_format="flac").content
    with sf.SoundFile(io.BytesIO(flac)) as file:
        assert (file.samplerate, file.channels) == (24_000, 1)
        assert file.frames == round(fake_seconds(TEXT) * 24_000)  # the header holds the length
        samples = file.read()
    assert len(samples) == file.frames


def test_the_openai_voices_setting_maps_openais_names_to_chosen_voices(serve_fake: ServerFactory) -> None:
    with serve_fake(openai_voices=("alloy=bf_emma", "nova=af_bella(1)+af_sky(1)")) as live:
        url = live.http_url + "/v1/audio/speech"

        def speak(voice: str) -> bytes:
            body = {"model": "tts-1", "input": TEXT, "voice": voice, "response_format": "pcm"}
            return httpx.post(url, json=body).content

        assert speak("alloy") == speak("bf_emma") != speak("af_alloy")
        assert speak("nova") == speak("af_bella(1)+af_sky(1)")
        assert speak("echo") == speak("am_echo")  # the others keep koe's mapping
        aliases = httpx.get(live.http_url + "/v1/audio/voices").json()["aliases"]
        assert aliases["alloy"] == "bf_emma" and aliases["echo"] == "am_echo"


@pytest.mark.parametrize("pairs", [("alloy",), ("robot=af_sky",), ("alloy=",)])
def test_a_bad_openai_voices_setting_stops_the_start_with_its_name(pairs: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="openai_voices"):
        Runtime(Settings(openai_voices=pairs))


def test_the_openai_voices_setting_comes_from_the_environment() -> None:
    settings = Settings.from_env({"KOE_OPENAI_VOICES": "alloy=bf_emma, echo=bm_george"})
    assert settings.openai_voices == ("alloy=bf_emma", "echo=bm_george")
