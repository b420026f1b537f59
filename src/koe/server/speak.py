"""An HTTP speech response: streamed segment by segment as synthesized, or one complete file.

Admission, voice and the first job's place in the queue are all settled before the status line is sent,
so a refusal is a proper 503/400 rather than a broken stream. A streamed body holds its request slot
until the response ends, however it ends (client gone, error, done).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack

import numpy as np
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from koe.audio.encoder import StreamEncoder, encode_whole
from koe.audio.formats import content_type
from koe.errors import KoeError
from koe.scheduler.deadline import PlaybackClock
from koe.server.requests import SpeechRequest
from koe.server.runtime import Runtime
from koe.server.synthesis import SegmentStream, Synthesized, resolve_voice
from koe.text.segment import Segmenter
from koe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)


class _HeldStreamingResponse(StreamingResponse):
    """A streaming response that runs ``release`` when it ends, even if its body was never iterated."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None], media_type: str) -> None:
        super().__init__(content, media_type=media_type)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def respond(runtime: Runtime, request: SpeechRequest, received_at: float) -> Response:
    """Synthesize ``request``; raises ``KoeError`` (overload, unknown voice) before any byte is sent."""
    held = ExitStack()
    loaded = held.enter_context(runtime.admitted("http"))
    try:
        stream = SegmentStream(
            loaded.speech,
            runtime.scheduler,
            loaded.cost,
            resolve_voice(loaded.speech, request.voice, request.speed, None),
            PlaybackClock(),
            Segmenter(),
            lookahead=runtime.settings.segments_ahead,
        )
        stream.add(request.text)
        stream.finish()
        stream.start()
    except BaseException:
        held.close()
        raise
    held.callback(stream.close)
    if not request.stream:
        with held:
            return await _whole(runtime, stream, request)
    chunks = _chunks(runtime, stream, request, received_at)
    media_type = "text/event-stream" if request.sse else content_type(request.format)
    return _HeldStreamingResponse(_sse(chunks) if request.sse else chunks, held.close, media_type)


async def _segments(runtime: Runtime, stream: SegmentStream) -> AsyncIterator[Synthesized]:
    """Each synthesized segment with audio; a segment that fails is logged and skipped."""
    while True:
        try:
            item = await stream.next()
        except KoeError as exc:
            runtime.metrics.errors.labels(exc.code).inc()
            logger.warning("a segment failed and was skipped: %s", exc.message)
            continue
        if item is None:
            return
        duration = len(item.audio) / SAMPLE_RATE
        runtime.metrics.observe_synthesis(item.took_s, duration)
        if duration:
            yield item


async def _chunks(
    runtime: Runtime, stream: SegmentStream, request: SpeechRequest, received_at: float
) -> AsyncIterator[bytes]:
    encoder = StreamEncoder(request.format, request.sample_rate)
    first = True
    async for item in _segments(runtime, stream):
        data = encoder.encode(item.audio)
        stream.clock.delivered(len(item.audio) / SAMPLE_RATE)
        if first:
            runtime.metrics.time_to_first_audio.labels("http").observe(time.monotonic() - received_at)
            first = False
        if data:
            yield data
    tail = encoder.finish()
    if tail:
        yield tail


async def _sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """OpenAI's ``stream_format=sse``: base64 audio in ``speech.audio.delta`` events, then ``done``."""
    async for chunk in chunks:
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode("ascii")}
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield b'data: {"type": "speech.audio.done"}\n\n'


async def _whole(runtime: Runtime, stream: SegmentStream, request: SpeechRequest) -> Response:
    pieces: list[np.ndarray] = []
    inference_s = 0.0
    async for item in _segments(runtime, stream):
        pieces.append(item.audio)
        inference_s += item.took_s
    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    duration = len(audio) / SAMPLE_RATE
    body = encode_whole(audio, request.format, request.sample_rate)
    headers = {
        "X-Audio-Duration": f"{duration:.3f}",
        "X-Inference-Time-Ms": f"{inference_s * 1000:.0f}",
        "X-RTF": f"{inference_s / duration:.3f}" if duration else "0",
    }
    return Response(body, media_type=content_type(request.format), headers=headers)
