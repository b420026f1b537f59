"""An HTTP speech response: streamed segment by segment as synthesized, or one complete file.

With ``timestamps`` the words come too: a ``speech.words`` event before each segment's audio events
(SSE), or one JSON body holding the whole file in base64 and every word (docs/api.md). With windowed
decoding a streamed segment's audio comes in parts as they are decoded; a complete file is decoded whole.

Admission, voice and the first job's place in the queue are all settled before the status line is sent,
so a refusal is a proper 503/400 rather than a broken stream. A streamed body holds its request slot
until the response ends, however it ends (client gone, error, done). Synthesis stops within a segment of
the client leaving, streamed or not: a streamed body is cancelled by Starlette when the client
disconnects, a complete file here (its synthesis races the disconnect). A complete file, and each part of
a streamed body and its tail (for FLAC, sent whole, the whole file), is encoded in one of the runtime's
encoding threads (:attr:`~koe.server.runtime.Runtime.encoders`): a long MP3, AAC or FLAC takes up to seconds
of CPU, which on the event loop every other session would wait out; and the parts the segment cache replays
at once, to a socket whose buffers take megabytes, would be encoded one after another with no turn of the
loop in between.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from concurrent.futures import Executor
from contextlib import ExitStack

import numpy as np
from starlette.responses import JSONResponse, Response
from starlette.types import Receive

from koe.audio.encoder import body_encoder, encode_whole
from koe.audio.formats import content_type
from koe.logs import log_refusal
from koe.pipeline.listener import Listener
from koe.pipeline.markup import check_text
from koe.pipeline.speaker import SegmentAudio, SegmentFailed, SegmentStarted, Speaker
from koe.server.metrics import Metrics
from koe.server.requests import Body, SpeechRequest, field_named
from koe.server.runtime import Runtime
from koe.types import SAMPLE_RATE
from koe.wire.messages import SynthesisComplete
from koe.wire.streaming import HeldStreamingResponse
from koe.wire.words import SpokenWord

logger = logging.getLogger(__name__)

_EVENT_STREAM = "text/event-stream"
#: The status of the response to a client that has left (it is never sent: the connection is gone).
_GONE_STATUS = 204


async def respond(runtime: Runtime, request: SpeechRequest, received_at: float, receive: Receive) -> Response:
    """Synthesize ``request``; raises ``KoeError`` (overload, unknown voice) before any byte is sent.

    ``receive`` is the request's ASGI receive, its body already read: it says when the client leaves.
    """
    held = ExitStack()
    synthesizer = held.enter_context(runtime.admitted("http"))
    try:
        with field_named("voice"):
            voice = synthesizer.voice(request.voice, request.speed, request.lang, request.lexicon)
        # a 400 now rather than failed segments later; in a thread, as reading SSML costs time linear in it
        await asyncio.to_thread(check_text, request.text, voice.lang)
        # a request is a listener of its own; a bad one gets its 400 whatever the load
        held.enter_context(runtime.capacity.seat().speaking())
        stream = synthesizer.stream(voice, Listener(), complete=_is_whole(request))
        stream.add(request.text)
        stream.finish()
        stream.start()
    except BaseException:
        held.close()
        raise
    held.callback(stream.close)
    speaker = synthesizer.speaker(stream, "http", started_at=received_at)
    held.callback(_log_request, request, speaker)
    parts = _parts(speaker, runtime.metrics)
    if _is_whole(request):
        with held:
            return await _unless_disconnected(receive, _whole(parts, speaker, request, runtime.encoders))
    chunks = _chunks(parts, request, runtime.encoders)
    if request.body is Body.OPENAI_SSE:
        return HeldStreamingResponse(_sse(chunks, request.timestamps), held.close, _EVENT_STREAM)
    if request.body is Body.AWS_SSE:
        events = _aws_sse(chunks, request, speaker, received_at)
        return HeldStreamingResponse(events, held.close, _EVENT_STREAM)
    return HeldStreamingResponse(_audio(chunks), held.close, content_type(request.format))


async def _unless_disconnected(receive: Receive, work: Awaitable[Response]) -> Response:
    """``work``'s response, or, if the client disconnects first, ``work`` cancelled (its synthesis stops)
    and an empty response that nobody will read."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return Response(status_code=_GONE_STATUS)
    return task.result()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _is_whole(request: SpeechRequest) -> bool:
    """One complete body: nothing is heard before the end, so windows would only add work."""
    return not request.stream or (request.timestamps and not request.sse)


def _log_request(request: SpeechRequest, speaker: Speaker) -> None:
    """The request's one summary line: counts and times, never its text."""
    fields = {"request": uuid.uuid4().hex[:12], "chars": len(request.text), "format": request.format.value}
    logger.info("request ended", extra={**fields, **speaker.tally.fields(speaker.started_at)})


Parts = AsyncIterator[tuple[tuple[SpokenWord, ...], SegmentAudio]]


async def _parts(speaker: Speaker, metrics: Metrics) -> Parts:
    """Each part of a segment's audio with its segment's words (with the first part), timed from the
    response's first sample; a segment that fails is logged and skipped."""
    words: tuple[SpokenWord, ...] = ()
    async for event in speaker.events():
        match event:
            case SegmentStarted():
                words = event.turn_words()
            case SegmentAudio():
                yield words, event
                words = ()
            case SegmentFailed(error=error):
                metrics.errors.labels(error.code).inc()
                log_refusal(logger, "a segment failed and was skipped", error, level=logging.WARNING)
    speaker.tally.outcome = "completed"


async def _chunks(
    parts: Parts, request: SpeechRequest, encoders: Executor
) -> AsyncIterator[tuple[tuple[SpokenWord, ...], bytes]]:
    """Each part's encoded audio (may be empty: encoders buffer; FLAC comes whole at the end) with its words;
    then the encoder's tail: for FLAC it is the whole file. The encoder is opened (its codec's first import
    too), fed and finished in ``encoders``' threads, one call at a time, so the loop never runs a codec."""
    loop = asyncio.get_running_loop()
    encoder = await loop.run_in_executor(encoders, body_encoder, request.format, request.sample_rate)
    async for words, part in parts:
        yield words, await loop.run_in_executor(encoders, encoder.encode, part.audio)
    yield (), await loop.run_in_executor(encoders, encoder.finish)


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


async def _aws_sse(
    chunks: AsyncIterator[tuple[tuple[SpokenWord, ...], bytes]],
    request: SpeechRequest,
    speaker: Speaker,
    received_at: float,
) -> AsyncIterator[bytes]:
    """The AWS sample's ``transport: sse``: ``audio_stream_start``, an ``audio_chunk`` (base64) per
    encoded part, then ``audio_stream_end`` with the totals under both spellings of their names."""
    request_id = request.request_id if request.request_id is not None else uuid.uuid4().hex
    start = {"type": "audio_stream_start", "request_id": request_id, "format": request.format.value}
    yield _event({**start, "sample_rate": request.sample_rate}, named=True)
    index = 0
    async for _words, data in chunks:
        if data:
            audio = base64.b64encode(data).decode("ascii")
            yield _event(
                {"type": "audio_chunk", "request_id": request_id, "index": index, "audio": audio}, named=True
            )
            index += 1
    total_s, elapsed_s = round(speaker.total_s, 3), round(time.monotonic() - received_at, 3)
    end = {"type": "audio_stream_end", "request_id": request_id, "chunks": index}
    totals = {"total_duration_s": total_s, "elapsed_s": elapsed_s}
    aliases = {alias: totals[name] for alias, name in SynthesisComplete.ALIASES.items()}
    yield _event({**end, **totals, **aliases}, named=True)


def _event(body: dict[str, object], *, named: bool = False) -> bytes:
    """One Server-Sent Event; ``named`` adds an ``event:`` line with its type (for ``addEventListener``)."""
    head = f"event: {body['type']}\n" if named else ""
    return f"{head}data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


async def _whole(parts: Parts, speaker: Speaker, request: SpeechRequest, encoders: Executor) -> Response:
    """The complete file, once every segment is synthesized, encoded in one of ``encoders``' threads.

    Cancelling is safe: an encoding still waiting for a thread never starts; one running finishes in its
    thread (bounded by the request's text limit) and is dropped.
    """
    pieces: list[np.ndarray] = []
    words: list[SpokenWord] = []
    async for part_words, part in parts:
        pieces.append(part.audio)
        words += part_words
    inference_s = speaker.tally.synthesis_s
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(encoders, _whole_response, pieces, words, request, inference_s)


def _whole_response(
    pieces: list[np.ndarray], words: list[SpokenWord], request: SpeechRequest, inference_s: float
) -> Response:
    """The file, or with ``timestamps`` the JSON holding it in base64 beside the words; in a thread."""
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
