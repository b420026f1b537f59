"""An HTTP speech response: streamed segment by segment as synthesized, or one complete file.

With ``timestamps`` the words come too: a ``speech.words`` event before each segment's audio events
(SSE), or one JSON body holding the whole file in base64 and every word (docs/api.md). With windowed
decoding a streamed segment's audio comes in parts as they are decoded; a complete file is decoded whole.

Admission, voice and the first job's place in the queue are all settled before the status line is sent,
so a refusal is a proper 503/400 rather than a broken stream. A streamed body holds its request slot
until the response ends, however it ends (client gone, error, done).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack

import numpy as np
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from koe.audio.encoder import StreamEncoder, encode_whole
from koe.audio.formats import content_type
from koe.errors import KoeError
from koe.scheduler.deadline import PlaybackClock
from koe.server.requests import SpeechRequest
from koe.server.runtime import Runtime
from koe.server.segment_job import Synthesized, resolve_voice
from koe.server.synthesis import SegmentStream
from koe.server.tally import Tally
from koe.server.words import SpokenWord
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
            windowed=runtime.settings.windowed and not _is_whole(request),
        )
        stream.add(request.text)
        stream.finish()
        stream.start()
    except BaseException:
        held.close()
        raise
    held.callback(stream.close)
    tally = Tally()
    held.callback(_log_request, request, tally, received_at)
    if _is_whole(request):
        with held:
            return await _whole(runtime, stream, request, tally)
    chunks = _chunks(runtime, stream, request, received_at, tally)
    if request.sse:
        return _HeldStreamingResponse(_sse(chunks, request.timestamps), held.close, "text/event-stream")
    return _HeldStreamingResponse(_audio(chunks), held.close, content_type(request.format))


def _is_whole(request: SpeechRequest) -> bool:
    """One complete body: nothing is heard before the end, so windows would only add work."""
    return not request.stream or (request.timestamps and not request.sse)


def _log_request(request: SpeechRequest, tally: Tally, received_at: float) -> None:
    """The request's one summary line: counts and times, never its text."""
    fields = {"request": uuid.uuid4().hex[:12], "chars": len(request.text), "format": request.format.value}
    logger.info("request ended", extra={**fields, **tally.fields(received_at)})


async def _segments(runtime: Runtime, stream: SegmentStream, tally: Tally) -> AsyncIterator[Synthesized]:
    """Each part of a synthesized segment with audio; a segment that fails is logged and skipped."""
    while True:
        try:
            item = await stream.next()
        except KoeError as exc:
            runtime.metrics.errors.labels(exc.code).inc()
            logger.warning("a segment failed and was skipped: %s", exc.message)
            continue
        if item is None:
            tally.outcome = "completed"
            return
        if item.last:
            runtime.metrics.observe_synthesis(item.took_s, item.end_s)
            tally.add(item.took_s, item.end_s)
        if item.audio.size:
            yield item


async def _chunks(
    runtime: Runtime, stream: SegmentStream, request: SpeechRequest, received_at: float, tally: Tally
) -> AsyncIterator[tuple[tuple[SpokenWord, ...], bytes]]:
    """Each part's encoded audio (may be empty: encoders buffer) with its segment's words (with the first
    part), in seconds from the response's first sample; then the encoder's tail."""
    encoder = StreamEncoder(request.format, request.sample_rate)
    first = True
    offset_s = 0.0
    async for item in _segments(runtime, stream, tally):
        data = encoder.encode(item.audio)
        duration = len(item.audio) / SAMPLE_RATE
        stream.clock.delivered(duration)
        if first:
            runtime.metrics.time_to_first_audio.labels("http").observe(time.monotonic() - received_at)
            tally.audio_sent()
            first = False
        yield tuple(word.shifted(offset_s) for word in item.words), data
        offset_s += duration
    yield (), encoder.finish()


async def _audio(chunks: AsyncIterator[tuple[tuple[SpokenWord, ...], bytes]]) -> AsyncIterator[bytes]:
    async for _words, data in chunks:
        if data:
            yield data


async def _sse(
    chunks: AsyncIterator[tuple[tuple[SpokenWord, ...], bytes]], timestamps: bool
) -> AsyncIterator[bytes]:
    """OpenAI's ``stream_format=sse``: base64 audio in ``speech.audio.delta`` events, then ``done``; with
    ``timestamps``, a ``speech.words`` event before each segment's audio."""
    async for words, data in chunks:
        if timestamps and words:
            yield _event({"type": "speech.words", "words": [word.to_json() for word in words]})
        if data:
            yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})
    yield _event({"type": "speech.audio.done"})


def _event(body: dict[str, object]) -> bytes:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


async def _whole(runtime: Runtime, stream: SegmentStream, request: SpeechRequest, tally: Tally) -> Response:
    pieces: list[np.ndarray] = []
    words: list[SpokenWord] = []
    inference_s = 0.0
    duration = 0.0
    async for item in _segments(runtime, stream, tally):
        pieces.append(item.audio)
        words += (word.shifted(duration) for word in item.words)
        duration += len(item.audio) / SAMPLE_RATE
        if item.last:
            inference_s += item.took_s
    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    duration = len(audio) / SAMPLE_RATE
    body = encode_whole(audio, request.format, request.sample_rate)
    headers = {
        "X-Audio-Duration": f"{duration:.3f}",
        "X-Inference-Time-Ms": f"{inference_s * 1000:.0f}",
        "X-RTF": f"{inference_s / duration:.3f}" if duration else "0",
    }
    if request.timestamps:
        timestamped = {
            "audio": base64.b64encode(body).decode("ascii"),
            "content_type": content_type(request.format),
            "duration_s": round(duration, 3),
            "words": [word.to_json() for word in words],
        }
        return JSONResponse(timestamped, headers=headers)
    return Response(body, media_type=content_type(request.format), headers=headers)
