"""Deepgram's REST TTS (``POST /v1/speak``) and its WebSocket connect, as Deepgram's clients send them, on the
fake engine: the audio is decoded and its length and rate checked against the fake's known output."""

from __future__ import annotations

import io

import av
import httpx
import pytest
import soundfile as sf
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from live_checks import failures_logged, metric
from live_server import LiveServer
from support.fake import fake_seconds
from ws_events import audio, of_type, run, send, until

TEXT = "Hello there."
#: Requests admitted to synthesis over HTTP, by the server's own count.
ADMITTED = 'koe_sessions_total{transport="http"}'


def speak(server: LiveServer, query: str, text: str = TEXT) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/speak?{query}", json={"text": text})


@pytest.mark.parametrize(
    ("query", "content_type", "rate", "width"),
    [
        ("encoding=linear16&container=none&sample_rate=16000", "audio/pcm", 16000, 2),
        ("encoding=mulaw&container=none", "audio/PCMU", 8000, 1),  # telephony's rate by default
        ("encoding=alaw&sample_rate=16000", "audio/PCMA", 16000, 1),
    ],
)
def test_raw_encodings_give_exactly_the_fakes_audio_at_the_asked_rate(
    fake_server: LiveServer, query: str, content_type: str, rate: int, width: int
) -> None:
    response = speak(fake_server, query)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == content_type
    assert len(response.content) == round(fake_seconds(TEXT) * rate) * width


@pytest.mark.parametrize(
    ("query", "container", "rate", "slack_s"),
    [
        ("encoding=linear16", "wav", 24000, 0.0),  # Deepgram's default container for linear16
        ("encoding=linear16&container=wav&sample_rate=48000", "wav", 48000, 0.0),
        ("", "mp3", 24000, 0.1),  # no encoding: Deepgram's default, MP3
        ("encoding=opus", "ogg", 48000, 0.05),  # Opus decodes at 48 kHz whatever it was sent at
        ("encoding=aac&sample_rate=16000", "aac", 16000, 0.13),  # ADTS keeps the encoder's priming
    ],
)
def test_container_encodings_decode_to_the_fakes_length(
    fake_server: LiveServer, query: str, container: str, rate: int, slack_s: float
) -> None:
    response = speak(fake_server, query)
    assert response.status_code == 200, response.text
    with av.open(io.BytesIO(response.content)) as decoded:
        assert decoded.format.name.split(",")[0] == container
        frames = list(decoded.decode(audio=0))
    assert frames[0].sample_rate == rate
    seconds = sum(frame.samples for frame in frames) / rate
    assert fake_seconds(TEXT) <= seconds <= fake_seconds(TEXT) + slack_s  # codec priming and frame padding


def test_flac_is_whole_so_soundfile_reads_it(fake_server: LiveServer) -> None:
    response = speak(fake_server, "encoding=flac&sample_rate=16000")
    samples, rate = sf.read(io.BytesIO(response.content))
    assert rate == 16000 and len(samples) == round(fake_seconds(TEXT) * 16000)


def test_model_names_the_voice_as_voice_does(fake_server: LiveServer) -> None:
    raw = "encoding=linear16&container=none"
    thalia = speak(fake_server, f"{raw}&model=aura-2-thalia-en").content
    assert (
        thalia
        == speak(fake_server, f"{raw}&model=af_bella").content
        == speak(fake_server, f"{raw}&voice=af_bella").content
    )
    assert thalia != speak(fake_server, f"{raw}&model=aura-2-draco-en").content
    assert speak(fake_server, f"{raw}&model=aura-2-helena-en").content == speak(fake_server, raw).content


def test_responses_carry_deepgrams_headers(fake_server: LiveServer) -> None:
    response = speak(fake_server, "model=aura-2-thalia-en&encoding=linear16&container=none")
    assert response.headers["dg-model-name"] == "aura-2-thalia-en"
    assert response.headers["dg-char-count"] == str(len(TEXT))
    assert response.headers["dg-request-id"] == response.headers["x-request-id"]


@pytest.mark.parametrize(
    ("query", "body", "says"),
    [
        ("encoding=wma", {"text": TEXT}, "encoding must be one of linear16"),
        ("encoding=mulaw&container=wav", {"text": TEXT}, "container for mulaw must be none"),
        ("encoding=opus&container=none", {"text": TEXT}, "container for opus must be ogg"),
        ("encoding=linear16&sample_rate=11025", {"text": TEXT}, "sample_rate"),
        ("encoding=linear16&sample_rate=fast", {"text": TEXT}, "sample_rate must be an integer"),
        ("model=aura-2-nobody-en", {"text": TEXT}, "unknown Deepgram model 'aura-2-nobody-en'"),
        ("model=zz_nobody", {"text": TEXT}, "unknown voice 'zz_nobody'"),
        ("speed=9", {"text": TEXT}, "speed"),
        ("", {"words": TEXT}, "text"),
        ("", {"text": "  "}, "text must contain something to say"),
    ],
)
def test_refusals_come_in_deepgrams_error_shape(
    fake_server: LiveServer, query: str, body: dict[str, str], says: str
) -> None:
    response = httpx.post(f"{fake_server.http_url}/v1/speak?{query}", json=body)
    assert response.status_code == 400
    error = response.json()
    assert set(error) == {"err_code", "err_msg", "request_id"}
    assert says in error["err_msg"]
    assert error["request_id"] == response.headers["x-request-id"]


#: Query values that broke the response after its synthesis was admitted: a ``model`` echoed into
#: ``dg-model-name`` that no header can carry, a ``sample_rate`` that ``str.isdigit`` passes and ``int``
#: refuses (or, in another script's digits, takes).
HOSTILE_QUERIES = {
    "emoji-model": "voice=af_heart&model=%F0%9F%98%80",
    "crlf-model": "voice=af_heart&model=af_heart%0D%0AX-Smuggled:%20yes",
    "ideographic-space-model": "voice=af_heart&model=%E3%80%80",
    "nul-model": "voice=af_heart&model=af_heart%00",
    "superscript-rate": "encoding=linear16&sample_rate=%C2%B2",
    "5000-nines-rate": "encoding=linear16&sample_rate=" + "9" * 5000,
    "arabic-indic-rate": "encoding=linear16&sample_rate=%D9%A1%D9%A6%D9%A0%D9%A0%D9%A0",  # 16000
    "underscored-rate": "encoding=linear16&sample_rate=16_000",
}


@pytest.mark.parametrize("query", list(HOSTILE_QUERIES.values()), ids=list(HOSTILE_QUERIES))
def test_hostile_query_values_are_invalid_field_before_admission_and_log_no_failure(
    fake_server: LiveServer, query: str
) -> None:
    admitted = metric(fake_server, ADMITTED)
    with failures_logged() as failures, httpx.Client(timeout=60) as client:
        response = client.post(f"{fake_server.http_url}/v1/speak?{query}", json={"text": TEXT})
        # answered after the refusal's step on the server's loop, where a failure would have been logged
        assert client.get(fake_server.http_url + "/ping").status_code == 200
    assert (response.status_code, response.json()["err_code"]) == (400, "invalid_field"), response.text
    assert "x-smuggled" not in response.headers and "dg-model-name" not in response.headers
    assert len(response.json()["err_msg"]) < 200
    assert metric(fake_server, ADMITTED) == admitted
    assert [record.getMessage() for record in failures] == []


def test_a_blend_with_spaces_inside_is_echoed_in_dg_model_name_as_it_came(fake_server: LiveServer) -> None:
    response = speak(fake_server, "encoding=linear16&model=af_bella(2)%20%2B%20af_sky(1)")
    assert response.status_code == 200, response.text
    assert response.headers["dg-model-name"] == "af_bella(2) + af_sky(1)"


# --- WebSocket -----------------------------------------------------------------------------------------


def test_the_websocket_model_names_the_voice_too(fake_server: LiveServer) -> None:
    async def turn(query: str) -> bytes:
        async with connect(
            f"{fake_server.ws_url}/v1/speak?encoding=linear16&sample_rate=16000&{query}"
        ) as ws:
            await send(ws, {"type": "Speak", "text": TEXT})
            await send(ws, {"type": "Flush"})
            return audio(await until(ws, of_type("Flushed")))

    async def main() -> None:
        thalia = await turn("model=aura-2-thalia-en")
        assert thalia == await turn("voice=af_bella") != await turn("model=aura-2-draco-en")
        assert len(thalia) == round(fake_seconds(TEXT) * 16000) * 2

    run(main)


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/v1/speak?model=aura-2-thalia-en&encoding=mp3&sample_rate=24000", "format must be one of"),
        ("/v1/speak?model=aura-2-nobody-en&encoding=linear16", "unknown Deepgram model"),
        ("/v1/speak?model=zz_nobody", "unknown voice 'zz_nobody'"),
        ("/invocations-bidirectional-stream?model=aura-2-thalia-en&encoding=opus", "format must be one of"),
    ],
)
def test_a_deepgram_connect_koe_cannot_honour_is_refused_at_the_handshake(
    fake_server: LiveServer, path: str, says: str
) -> None:
    """LiveKit takes any ``error`` message as fatal: no error-then-PCM, a clean HTTP 400 instead."""

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(fake_server.ws_url + path):
                pass
        response = refused.value.response
        assert response.status_code == 400
        assert says in response.body.decode()

    run(main)


def test_a_koe_connect_with_a_bad_setting_still_opens_and_says_why(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/v1/stream?format=mp3") as ws:
            error = (await until(ws, of_type("error")))[-1]
        assert error["code"] == "invalid_field" and "format" in error["message"]

    run(main)
