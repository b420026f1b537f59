"""The client libraries voice-agent builders already run, unchanged, against a live koe server: Deepgram's
SDK, pipecat's Deepgram and SageMaker TTS services, LiveKit's Deepgram and OpenAI plugins.

Their pins clash with koe's (websockets, protobuf...), so they live in their own environment,
``.venv-clients`` (``make clients``, from ``tests/compat/clients.lock``), and each runs as a subprocess:
a driver in ``tests/compat/drivers`` runs the library's own code and prints what it received. The server
runs the fake engine, so every decoded length is known exactly (``support.fake.fake_seconds``); the
interruption runs slow it down so that the user barges in while audio is still being made.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from live_server import LiveServer, ServerFactory
from support.fake import FakeEngine, fake_seconds

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
DRIVERS = Path(__file__).parent / "drivers"
KEY = "koe-test-key-0123456789abcdef"
RATE = 16000
SHORT = "Hello there."
OTHER = "How are you today?"
#: Three sentences: with the slowed engine the later ones are still being made when the user barges in.
LONG = "This is a long answer that the user interrupts before it ends. And here is more. And more after that."
#: Per engine call: slow enough that an interruption 0.3 s in finds audio still to come.
SLOW_S = 0.4
_RUN_TIMEOUT_S = 180


def pcm_bytes(text: str, rate: int = RATE) -> int:
    return round(fake_seconds(text) * rate) * 2


def drive(driver: str, *args: str) -> dict[str, Any]:
    if not CLIENTS_PYTHON.exists():
        pytest.skip("the client libraries are not installed: run `make clients`")
    done = subprocess.run(
        [str(CLIENTS_PYTHON), str(DRIVERS / driver), *args],
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["pcm"] = [base64.b64decode(audio) for audio in result.get("audio", [])]
    return result


@pytest.fixture(scope="module")
def keyed(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    with serve_fake(api_key=KEY) as live:
        yield live


@pytest.fixture(scope="module")
def keyed_slow(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    with serve_fake(FakeEngine(delay_s=SLOW_S), api_key=KEY) as live:
        yield live


@pytest.fixture(scope="module")
def behind_sagemaker(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """No key: SageMaker authenticates its callers itself."""
    with serve_fake(FakeEngine(delay_s=SLOW_S)) as live:
        yield live


# --- Deepgram's SDK ---------------------------------------------------------------------------------------


def test_deepgram_sdk_rest_generate_gets_a_wav_of_the_model_voice(keyed: LiveServer) -> None:
    result = drive("deepgram_sdk.py", keyed.http_url, KEY, "rest", SHORT, OTHER)
    assert result["error"] is None
    for text, wav_bytes in zip((SHORT, OTHER), result["pcm"], strict=True):
        with wave.open(io.BytesIO(wav_bytes)) as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (RATE, 1, 2)
            assert len(wav.readframes(1 << 30)) == pcm_bytes(text)  # streamed: the header's size is "unknown"


def test_deepgram_sdk_websocket_speaks_and_flushes_each_text(keyed: LiveServer) -> None:
    result = drive("deepgram_sdk.py", keyed.http_url, KEY, "ws", SHORT, OTHER)
    assert result["error"] is None
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(SHORT), pcm_bytes(OTHER)]
    assert result["replies"] == [{"type": "Flushed", "sequence_id": 0}, {"type": "Flushed", "sequence_id": 1}]


def test_deepgram_sdk_with_a_wrong_key_is_told_what_arrived(keyed: LiveServer) -> None:
    result = drive("deepgram_sdk.py", keyed.http_url, "not-the-key-0123456789abcdef", "rest-wrong-key", SHORT)
    assert result["error"]["status"] == 401
    assert "got a key as Authorization: Token that does not match" in result["error"]["body"]["err_msg"]


# --- pipecat ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ws", "http"])
def test_pipecats_deepgram_services_speak_each_text_at_the_pipeline_rate(
    keyed: LiveServer, mode: str
) -> None:
    result = drive("pipecat_deepgram.py", keyed.http_url, KEY, mode, SHORT, OTHER)
    assert result["errors"] == [] and result["rates"] == [RATE]
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(SHORT), pcm_bytes(OTHER)]


def test_pipecats_deepgram_interruption_clears_and_the_next_reply_is_clean(keyed_slow: LiveServer) -> None:
    """Any audio of the interrupted reply arriving after ``Clear`` would land in the next reply's context."""
    result = drive("pipecat_deepgram.py", keyed_slow.http_url, KEY, "ws-interrupt", LONG, OTHER)
    assert result["errors"] == []
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(OTHER)]  # pipecat drops the interrupted one


@pytest.mark.parametrize("service", ["nvidia", "deepgram"])
def test_pipecats_sagemaker_services_speak_each_text(behind_sagemaker: LiveServer, service: str) -> None:
    result = drive("pipecat_sagemaker.py", behind_sagemaker.ws_url, service, SHORT, OTHER)
    assert result["errors"] == [] and result["rates"] == [RATE]
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(SHORT), pcm_bytes(OTHER)]


@pytest.mark.parametrize("service", ["nvidia", "deepgram"])
def test_pipecats_sagemaker_interruption_leaves_the_next_reply_clean(
    behind_sagemaker: LiveServer, service: str
) -> None:
    """NVIDIA's: ``input_text.done``, the first message back, reconnect; Deepgram's: ``Clear``."""
    result = drive("pipecat_sagemaker.py", behind_sagemaker.ws_url, f"{service}-interrupt", LONG, OTHER)
    assert result["errors"] == []
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(OTHER)]


# --- LiveKit ----------------------------------------------------------------------------------------------

#: LiveKit's emitter pads a non-streamed reply's last frame to its 10 ms frame size.
_LIVEKIT_FRAME_S = 0.01


@pytest.mark.parametrize("mode", ["deepgram-synthesize", "deepgram-stream"])
def test_livekits_deepgram_plugin_speaks_with_the_token_key(keyed: LiveServer, mode: str) -> None:
    result = drive("livekit_tts.py", keyed.http_url, KEY, mode, SHORT, OTHER)
    assert result["rates"] == [RATE] and result["warnings"] == []
    for text, pcm in zip((SHORT, OTHER), result["pcm"], strict=True):
        assert pcm_bytes(text) <= len(pcm) <= pcm_bytes(text) + 2 * RATE * _LIVEKIT_FRAME_S


def test_livekits_deepgram_stream_closed_mid_reply_leaves_the_next_clean(keyed_slow: LiveServer) -> None:
    result = drive("livekit_tts.py", keyed_slow.http_url, KEY, "deepgram-interrupt", LONG, OTHER)
    assert [len(pcm) for pcm in result["pcm"]] == [pcm_bytes(OTHER)]


def test_livekits_openai_plugin_gets_pcm_and_the_request_id(keyed: LiveServer) -> None:
    result = drive("livekit_tts.py", keyed.http_url, KEY, "openai-synthesize", SHORT, OTHER)
    assert result["rates"] == [24000] and result["warnings"] == []
    assert all(len(request_id) == 32 for request_id in result["request_ids"])  # koe's x-request-id
    for text, pcm in zip((SHORT, OTHER), result["pcm"], strict=True):
        assert pcm_bytes(text, 24000) <= len(pcm) <= pcm_bytes(text, 24000) + 2 * 24000 * _LIVEKIT_FRAME_S
