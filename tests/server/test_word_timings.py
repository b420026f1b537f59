"""Word timings in-band against a live server: WebSocket ``words`` messages and HTTP ``timestamps``."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from live_server import LiveServer, ServerFactory
from support import Transcriber, words
from ws_events import Event, messages, of_type, run, send, until

PCM_BYTES_PER_S = 24_000 * 2
#: Written with markdown and a URL, which the normalizer rewrites ("example dot com slash docs").
TEXT = "Read **the guide** at https://example.com/docs today. Then rest."
WRITTEN = ["Read", "the", "guide", "at", "https://example.com/docs", "today", "Then", "rest"]
#: Silence the model puts around a segment: the leading pad token, a final pause after punctuation.
EDGE_S = 0.6


def _check_words(text: str, found: list[dict[str, Any]], start_s: float, end_s: float) -> None:
    """Monotonic, inside ``[start_s, end_s]`` and covering most of it, each span the word it names."""
    assert found, "no words"
    for word in found:
        a, b = word["source_span"]
        assert text[a:b] == word["word"]
        assert word["start_s"] < word["end_s"]
    for before, after in itertools.pairwise(found):
        assert before["end_s"] <= after["start_s"] and before["source_span"][1] <= after["source_span"][0]
    assert start_s <= found[0]["start_s"] < start_s + EDGE_S
    assert end_s - EDGE_S < found[-1]["end_s"] <= end_s + 1e-3


def _pcm(frames: list[Event]) -> np.ndarray:
    data = b"".join(f for f in frames if isinstance(f, bytes))
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


def test_koe_turns_get_words_before_each_segments_audio(
    koe_server: LiveServer, transcribe: Transcriber
) -> None:
    async def main() -> list[Event]:
        async with connect(koe_server.ws_url + "/v1/stream") as ws:
            await send(ws, {"type": "append", "text": TEXT})
            await send(ws, {"type": "flush"})
            return await until(ws, of_type("flushed"))

    events = run(main)
    spoken: list[dict[str, Any]] = []
    offset_s = 0.0
    for k, event in enumerate(events):
        if isinstance(event, dict) and event["type"] == "segment":
            following = events[k + 1]
            assert isinstance(following, dict) and following["type"] == "words"  # before the first frame
            assert (following["turn"], following["index"]) == (event["turn"], event["index"])
            end = next(e for e in events[k:] if isinstance(e, dict) and e["type"] == "segment_end")
            _check_words(TEXT, following["words"], offset_s, offset_s + end["duration_s"])
            spoken += following["words"]
            offset_s += end["duration_s"]
    assert [w["word"] for w in spoken] == WRITTEN
    # the times point at the audio: cut where "today" starts; the URL is heard before, not after
    pcm = _pcm(events)
    cut = int(spoken[WRITTEN.index("today")]["start_s"] * 24_000)
    before, after = words(transcribe(pcm[:cut])), words(transcribe(pcm[cut:]))
    assert before[-1] == "com" and "today" not in before
    assert after[-2:] == ["then", "rest"] and "com" not in after


def test_other_dialects_get_words_only_when_they_ask(fake_server: LiveServer) -> None:
    async def main() -> tuple[list[Event], list[Event]]:
        async with connect(fake_server.ws_url + "/v1/stream?words=false") as ws:
            await send(ws, {"type": "append", "text": "Quiet."})
            await send(ws, {"type": "flush"})
            koe_off = await until(ws, of_type("flushed"))
            await send(ws, {"text": "Hi there.", "words": True, "request_id": "r"})
            aws_on = await until(ws, of_type("synthesis_complete"))
        return koe_off, aws_on

    koe_off, aws_on = run(main)
    assert "words" not in {m["type"] for m in messages(koe_off)}
    kinds = [e["type"] if isinstance(e, dict) else "audio" for e in aws_on]
    assert kinds[:3] == ["synthesis_start", "words", "audio"]
    found = next(m for m in messages(aws_on) if m["type"] == "words")["words"]
    complete = aws_on[-1]
    assert isinstance(complete, dict)
    _check_words("Hi there.", found, 0.0, complete["total_duration_s"])
    assert [w["word"] for w in found] == ["Hi", "there"]


def _speech(server: LiveServer, **fields: Any) -> httpx.Response:
    body = {"model": "kokoro", "voice": "af_heart", "input": TEXT, "timestamps": True, **fields}
    response = httpx.post(server.http_url + "/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response


def test_http_timestamps_return_the_audio_and_its_words_as_json(fake_server: LiveServer) -> None:
    body = _speech(fake_server, response_format="pcm").json()
    assert body["content_type"] == "audio/pcm"
    pcm = base64.b64decode(body["audio"])
    assert body["duration_s"] == pytest.approx(len(pcm) / PCM_BYTES_PER_S, abs=1e-3)
    _check_words(TEXT, body["words"], 0.0, body["duration_s"])
    assert [w["word"] for w in body["words"]] == WRITTEN


def test_http_timestamps_over_sse_put_words_before_their_audio(serve_fake: ServerFactory) -> None:
    # TEXT's two sentences stay two segments when the first is not joined with the next to be windowed
    with serve_fake(windowed_first=False) as live:
        text = _speech(live, response_format="pcm", stream_format="sse").text
    events = [
        json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")
    ]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "speech.words" and kinds[-1] == "speech.audio.done"
    assert kinds.count("speech.words") >= 2  # one per segment, each ahead of that segment's audio
    found = [w for e in events if e["type"] == "speech.words" for w in e["words"]]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    _check_words(TEXT, found, 0.0, len(pcm) / PCM_BYTES_PER_S)
    assert [w["word"] for w in found] == WRITTEN


def test_the_timestamps_field_must_be_a_boolean(fake_server: LiveServer) -> None:
    body = {"model": "kokoro", "voice": "af_heart", "input": "Hi.", "timestamps": "yes"}
    response = httpx.post(fake_server.http_url + "/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 400
    assert "timestamps must be true or false" in response.json()["error"]["message"]
