"""NVIDIA NIM's realtime TTS events, in exactly the sequence pipecat's ``NvidiaSageMakerTTSService`` sends
them (pipecat 1.14, ``services/nvidia/sagemaker/tts.py``), on the fake engine: the base64 audio is decoded
and its length checked against the fake's known output. ``tests/compat`` runs the service's own code."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from live_server import LiveServer
from support.fake import fake_seconds
from ws_events import of_type, receive, run, send, until

RATE = 16000
SENTENCES = ("Hello there. ", "How are you today? ")
DATA = "conversation.item.speech.data"


def update(voice: str = "af_sky", rate: int = RATE) -> dict[str, Any]:
    """pipecat's ``_send_session_config``."""
    return {
        "type": "synthesize_session.update",
        "session": {
            "input_text_synthesis": {"voice_name": voice, "language_code": "en-US"},
            "output_audio_params": {"sample_rate_hz": rate},
        },
    }


async def speak(ws: ClientConnection, text: str) -> None:
    """pipecat's ``run_tts``: the text (with its trailing space), then a commit."""
    await send(ws, {"type": "input_text.append", "text": text})
    await send(ws, {"type": "input_text.commit"})


async def pcm_until(ws: ClientConnection, size: int, commits: int = 1) -> bytes:
    """Decode ``speech.data`` events until ``size`` bytes of audio came, with one ``input_text.committed``
    per commit among them; any other message fails."""
    pcm, committed = b"", 0
    while len(pcm) < size or committed < commits:
        event = await receive(ws)
        assert isinstance(event, dict), event
        if event == {"type": "input_text.committed"}:
            committed += 1
            continue
        assert event["type"] == DATA and set(event) == {"type", "audio"}, event
        pcm += base64.b64decode(event["audio"])
    assert committed == commits
    return pcm


def expected_bytes(*texts: str, rate: int = RATE) -> int:
    return sum(round(fake_seconds(text.strip()) * rate) * 2 for text in texts)


def test_the_session_update_is_answered_with_the_settings_in_force(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            await send(ws, update("bf_emma", 22050))
            updated = await receive(ws)
        assert updated == {
            "type": "synthesize_session.updated",
            "session": {
                "id": updated["session"]["id"],  # type: ignore[index]
                "object": "realtime.synthesize_session",
                "input_text_synthesis": {"voice_name": "bf_emma", "language_code": "en-US"},
                "output_audio_params": {
                    "sample_rate_hz": 22050,
                    "num_channels": 1,
                    "audio_format": "LINEAR_PCM",
                },
            },
        }

    run(main)


def test_each_commit_is_spoken_as_base64_pcm_and_done_completes_after_the_last_audio(
    fake_server: LiveServer,
) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream?format=mulaw") as ws:
            await send(ws, update())
            assert (await receive(ws))["type"] == "synthesize_session.updated"  # type: ignore[index]
            for sentence in SENTENCES:
                await speak(ws, sentence)
            # no completion per commit: pipecat reconnects when it reads one
            pcm = await pcm_until(ws, expected_bytes(*SENTENCES), commits=len(SENTENCES))
            await send(ws, {"type": "input_text.done"})
            assert await receive(ws) == {"type": "input_text.committed"}
            assert await receive(ws) == {"type": "conversation.item.speech.completed"}
            await send(ws, {"type": "session.end"})
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert len(pcm) == expected_bytes(*SENTENCES)  # PCM16 at 16 kHz, though the session said mulaw
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000

    run(main)


def test_done_during_speech_answers_and_a_reconnected_session_speaks_at_once(fake_server: LiveServer) -> None:
    """pipecat's interruption: ``input_text.done``, wait (at most 5 s) for any message, close, reconnect."""

    async def main() -> None:
        url = fake_server.ws_url + "/invocations-bidirectional-stream"
        async with connect(url, max_queue=None) as ws:  # takes in all it is sent while it closes
            await send(ws, update())
            await receive(ws)
            await speak(ws, "This is a long answer that the user will interrupt before it ends. " * 4)
            heard = [
                await receive(ws),
                await receive(ws),
            ]  # the commit's answer and the first audio, any order
            assert {"type": "input_text.committed"} in heard
            assert any(isinstance(event, dict) and event["type"] == DATA for event in heard)
            await send(ws, {"type": "input_text.done"})
            # pipecat waits for any message, then disconnects; the answer comes ahead of queued audio, so
            # that pipecat does not buffer a frame of the interrupted speech into its next reply
            event = await receive(ws)
            while isinstance(event, dict) and event["type"] == DATA:  # frames already on their way
                event = await receive(ws)
            assert event == {"type": "input_text.committed"}
        async with connect(url) as ws:
            await send(ws, update())
            await receive(ws)
            await speak(ws, SENTENCES[0])
            assert len(await pcm_until(ws, expected_bytes(SENTENCES[0]))) == expected_bytes(SENTENCES[0])

    run(main)


def test_pipecats_default_magpie_voice_is_koes_default_voice(fake_server: LiveServer) -> None:
    """pipecat's NVIDIA service sends ``Magpie-Multilingual.EN-US.Aria`` unless told otherwise; refused, it
    would reconnect and be refused again."""

    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            await send(ws, update("Magpie-Multilingual.EN-US.Aria"))
            updated = await receive(ws)
            await speak(ws, SENTENCES[0])
            pcm = await pcm_until(ws, expected_bytes(SENTENCES[0]))
        assert updated["session"]["input_text_synthesis"]["voice_name"] == "af_heart"  # type: ignore[index]
        assert len(pcm) == expected_bytes(SENTENCES[0])

    run(main)


def test_a_voice_koe_lacks_is_refused_with_the_list_and_the_session_goes_on(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            await send(ws, update("Magpie-Multilingual.EN-US.Nobody"))
            error = await receive(ws)
            await speak(ws, SENTENCES[0])
            pcm = await pcm_until(ws, expected_bytes(SENTENCES[0], rate=24000))
        assert error["code"] == "unknown_voice"  # type: ignore[index]
        assert "unknown Magpie voice 'Magpie-Multilingual.EN-US.Nobody'" in error["message"]  # type: ignore[index]
        assert "the speakers Aria, Diego" in error["message"]  # type: ignore[index]
        assert len(pcm) == expected_bytes(SENTENCES[0], rate=24000)  # the defaults: 24 kHz

    run(main)


def test_an_unsupported_audio_format_is_an_error_that_names_the_field(fake_server: LiveServer) -> None:
    async def main() -> None:
        async with connect(fake_server.ws_url + "/invocations-bidirectional-stream") as ws:
            message = update()
            message["session"]["output_audio_params"]["audio_format"] = "OGG_OPUS"
            await send(ws, message)
            error = (await until(ws, of_type("error")))[-1]
        assert error["code"] == "invalid_field" and "audio_format" in error["message"]

    run(main)
