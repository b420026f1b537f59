"""/ping, /invocations and /metrics against a live server with a real httpx client."""

from __future__ import annotations

import io
import threading
import time

import av
import httpx
import pytest
import soundfile

from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine
from ws_events import WAIT_S


def test_ping_is_200_when_ready(koe_server: LiveServer) -> None:
    response = httpx.get(koe_server.http_url + "/ping")
    assert (response.status_code, response.json()) == (200, {"status": "ready"})


def test_a_whole_file_comes_with_duration_inference_time_and_rtf(koe_server: LiveServer) -> None:
    response = httpx.post(
        koe_server.http_url + "/invocations",
        json={"text": "Hello there.", "stream": False, "sample_rate": 16000},
        timeout=120,
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    samples, rate = soundfile.read(io.BytesIO(response.content))
    assert rate == 16000
    duration = float(response.headers["x-audio-duration"])
    assert len(samples) / rate == pytest.approx(duration, abs=0.01)
    inference_ms = float(response.headers["x-inference-time-ms"])
    assert float(response.headers["x-rtf"]) == pytest.approx(inference_ms / 1000 / duration, rel=0.01)


def test_a_streamed_response_starts_before_the_rest_is_synthesized(serve_fake: ServerFactory) -> None:
    """Synthesis after the first engine call is held until the first audio has arrived."""
    held = threading.Event()
    text = "The first sentence is here. The second sentence is here. The third sentence is here."
    body = {"text": text, "format": "pcm", "stream": True}
    with (
        serve_fake(FakeEngine(gate=held, gate_after=1)) as live,
        httpx.stream("POST", live.http_url + "/invocations", json=body, timeout=WAIT_S) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "audio/pcm"
        chunks = response.iter_bytes()
        first = next(chunks)  # arrives while the rest is held
        held.set()
        streamed = first + b"".join(chunks)
        again = httpx.post(live.http_url + "/invocations", json=body, timeout=WAIT_S).content  # unheld now
    assert first and streamed == again and len(streamed) > len(first)


def test_a_text_plain_body_is_spoken_as_wav(koe_server: LiveServer) -> None:
    response = httpx.post(
        koe_server.http_url + "/invocations",
        content="Hi.",
        headers={"content-type": "text/plain"},
        timeout=120,
    )
    assert response.status_code == 200
    assert response.content[:4] == b"RIFF"


#: Two sentences: the streamed formats carry more than one segment.
FORMAT_TEXT = "Yes. Every format carries the same audio."


@pytest.mark.parametrize(
    ("fmt", "container", "rate", "decoded_rate", "slack_s"),
    [
        ("wav", "wav", 16000, 16000, 0.0),
        ("flac", "flac", 16000, 16000, 0.0),
        ("mp3", "mp3", 24000, 24000, 0.1),  # encoder priming and the last frame's padding
        ("opus", "ogg", 16000, 48000, 0.05),  # Opus decodes at 48 kHz whatever it was sent at
    ],
)
def test_every_format_decodes_to_the_pcm_of_the_same_text(
    fake_server: LiveServer, fmt: str, container: str, rate: int, decoded_rate: int, slack_s: float
) -> None:
    url = fake_server.http_url + "/invocations"
    pcm = httpx.post(url, json={"text": FORMAT_TEXT, "format": "pcm"}, timeout=WAIT_S).content
    pcm_s = len(pcm) / 2 / 24000
    response = httpx.post(url, json={"text": FORMAT_TEXT, "format": fmt, "sample_rate": rate}, timeout=WAIT_S)
    assert response.status_code == 200, response.text
    with av.open(io.BytesIO(response.content)) as decoded:
        assert decoded.format.name.split(",")[0] == container
        frames = list(decoded.decode(audio=0))
    assert {(f.sample_rate, len(f.layout.channels)) for f in frames} == {(decoded_rate, 1)}
    seconds = sum(frame.samples for frame in frames) / decoded_rate
    assert pcm_s - 1 / rate <= seconds <= pcm_s + slack_s, (seconds, pcm_s)


@pytest.mark.parametrize(
    ("body", "status", "code", "says"),
    [
        (b"{not json", 400, "invalid_json", "JSON"),
        (b'{"text": 5}', 400, "invalid_field", "text"),
        (b'{"text": "   "}', 400, "invalid_field", "text"),
        (b'{"text": "hi", "voice": "zz_nobody"}', 400, "unknown_voice", "af_heart"),
        (b'{"text": "hi", "format": "aiff"}', 400, "invalid_field", "format"),
        (b'{"text": "hi", "sample_rate": 11025}', 400, "invalid_field", "sample_rate"),
        (b'{"text": "hi", "format": "opus", "sample_rate": 44100}', 400, "invalid_field", "sample_rate"),
        (b'{"text": "hi", "speed": 9}', 400, "invalid_field", "speed"),
        (b'{"text": "hi", "stream": "yes"}', 400, "invalid_field", "stream"),
        (b'{"text": "hi", "request_timestamp": 1000}', 408, "request_stale", "old"),
        (b'{"text": "hi", "request_timestamp": "2001-01-01T00:00:00"}', 408, "request_stale", "old"),
        (b'{"text": "hi", "request_timestamp": "yesterday"}', 400, "invalid_field", "request_timestamp"),
        (b'{"text": "' + b"a" * 20_001 + b'"}', 413, "text_too_long", "20000"),
    ],
)
def test_bad_requests_get_the_documented_error_and_the_server_keeps_serving(
    koe_server: LiveServer, body: bytes, status: int, code: str, says: str
) -> None:
    response = httpx.post(
        koe_server.http_url + "/invocations",
        content=body,
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code == status
    assert response.json()["error"] == code
    assert says in response.json()["message"]
    assert httpx.get(koe_server.http_url + "/ping").status_code == 200


def test_a_fresh_request_timestamp_is_accepted(koe_server: LiveServer) -> None:
    body = {"text": "Now.", "request_timestamp": time.time(), "format": "pcm"}
    assert httpx.post(koe_server.http_url + "/invocations", json=body, timeout=120).status_code == 200


def test_an_oversized_body_and_a_foreign_content_type_are_refused(koe_server: LiveServer) -> None:
    big = httpx.post(
        koe_server.http_url + "/invocations",
        content=b"x" * (256 * 1024 + 1),
        headers={"content-type": "text/plain"},
    )
    assert (big.status_code, big.json()["error"]) == (413, "body_too_large")
    xml = httpx.post(
        koe_server.http_url + "/invocations", content=b"<text/>", headers={"content-type": "application/xml"}
    )
    assert (xml.status_code, xml.json()["error"]) == (415, "unsupported_media_type")


def refusal_code(response: httpx.Response) -> str:
    """koe's error code in whichever shape the route answers: Deepgram's, OpenAI's or koe's own."""
    body = response.json()
    if "err_code" in body:
        return str(body["err_code"])
    error = body["error"]
    return str(error["code"] if isinstance(error, dict) else error)


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/v1/speak", "text/plain"),
        ("/v1/speak", "application/x-www-form-urlencoded"),
        ("/agent/invocations", "text/plain; charset=utf-8"),
        ("/agent/invocations", "application/x-www-form-urlencoded"),
        ("/v1/audio/speech", "text/plain"),
        ("/invocations", "application/x-www-form-urlencoded"),  # text/plain is spoken there
    ],
)
def test_a_body_of_a_media_type_the_route_does_not_read_is_415_on_every_route(
    fake_server: LiveServer, path: str, content_type: str
) -> None:
    response = httpx.post(
        fake_server.http_url + path, content=b"text=Hello+there.", headers={"content-type": content_type}
    )
    assert (response.status_code, refusal_code(response)) == (415, "unsupported_media_type")
    assert content_type in response.text  # the message says what came


def test_metrics_are_prometheus_text_with_koe_series(koe_server: LiveServer) -> None:
    httpx.post(koe_server.http_url + "/invocations", json={"text": "Count me.", "format": "pcm"}, timeout=120)
    httpx.post(koe_server.http_url + "/invocations", json={"text": "Count me.", "voice": "zz_nobody"})
    response = httpx.get(koe_server.http_url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for series in (
        "koe_time_to_first_audio_seconds_bucket",
        "koe_synthesis_seconds_count",
        "koe_real_time_factor_bucket",
        "koe_queue_depth",
        "koe_jobs_running",
        "koe_listeners_speaking",
        "koe_jobs_total",
        "koe_active_sessions",
        "koe_segments_total",
        "koe_audio_seconds_total",
        "koe_errors_total",
        "koe_cancels_total",
    ):
        assert series in text, series
    assert 'koe_time_to_first_audio_seconds_count{transport="http"}' in text
    assert 'koe_errors_total{code="unknown_voice"}' in text
