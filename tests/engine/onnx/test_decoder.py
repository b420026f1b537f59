"""Streaming one segment: timing first, silence at once, chunks that add up, cancel, words that line up."""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from koe.engine.base import AudioChunk, Cancel, StreamEvent, SynthesisRequest
from koe.engine.onnx.calibration import Calibration
from koe.engine.onnx.decoder import OnnxStream, StreamingDecoder
from koe.engine.onnx.stages import FloatArray, Front, Statistics
from koe.engine.onnx.windowing import (
    CONTEXT_FRAMES,
    LEAD_CONTEXT_FRAMES,
    LEAD_DECODED_FRAMES,
    MIN_WINDOWED_FRAMES,
    OVERRUN,
    input_span,
    next_window_end,
    steady_buffer_s,
)
from koe.engine.quality import compare
from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.pipeline.listener import PlaybackClock
from koe.pipeline.speech import Speech
from koe.scheduler.cost import LinearCost
from koe.types import SAMPLE_RATE, Audio
from support import Transcriber, words

SENTENCE = "Please call Stella and ask her to bring these things with her from the store."
#: A bound on a whole decode well below ``SENTENCE``'s length (2 s of audio).
WHOLE_DECODE_MAX_FRAMES = 80
#: The windowed quality gate's bound on distance and level to the whole decode (test_streaming_quality.py).
TAKE_TO_TAKE_DB = 3.0
#: A loaded 2-core machine's window cost, fixed and per input frame (test_windowing.py's ``LOADED``): the
#: steady buffer it asks for is more than a later segment may start with.
LOADED_WINDOW_S = (0.088, 0.0094)


def _request(speech: Speech, text: str, voice: str = "af_heart", speed: float = 1.0) -> SynthesisRequest:
    (phonemes,) = speech.phonemize(text, speech.voices.lang_of(voice))
    return SynthesisRequest(phonemes, speech.voices.resolve(voice), speed)


def _played(streaming: StreamingDecoder, request: SynthesisRequest) -> tuple[OnnxStream, list[StreamEvent]]:
    """The windowed stream of ``request`` for a listener who plays each chunk in real time as it comes."""
    clock = PlaybackClock()
    segment = streaming.stream(request, windowed=True, buffered_s=clock.ahead_s)
    events = []
    for event in segment:
        events.append(event)
        if isinstance(event, AudioChunk):
            clock.delivered(event.audio.size / SAMPLE_RATE)
    return segment, events


def _first_window(
    streaming: StreamingDecoder, request: SynthesisRequest, queued_s: float
) -> tuple[int, int, int, float]:
    """The first window's start and end frame, the segment's frames and the audio the listener held when it
    was sized: ``queued_s`` of earlier audio, not yet playing; with none (a turn's opening) the segment's
    leading silence, which only an opening keeps (koe.pipeline.seams)."""
    clock = PlaybackClock(now=lambda: 0.0)  # frozen: what is queued stays queued
    if queued_s:
        clock.delivered(queued_s)
    segment = streaming.stream(request, windowed=True, buffered_s=clock.ahead_s)
    timing, lead = next(segment), next(segment)
    assert isinstance(timing, SegmentTiming) and isinstance(lead, AudioChunk) and lead.audio.size
    if not queued_s:
        clock.delivered(lead.audio.size / SAMPLE_RATE)
    held_s = clock.ahead_s()
    window = next(segment)
    assert isinstance(window, AudioChunk)
    start = lead.audio.size // FRAME_SAMPLES
    return start, start + window.audio.size // FRAME_SAMPLES, timing.frames, held_s


def _split(events: list[StreamEvent]) -> tuple[SegmentTiming, list[AudioChunk]]:
    timing, *chunks = events
    assert isinstance(timing, SegmentTiming)
    assert all(isinstance(chunk, AudioChunk) for chunk in chunks)
    return timing, [chunk for chunk in chunks if isinstance(chunk, AudioChunk)]


def test_timing_comes_first_then_silence_then_chunks_as_long_as_the_whole_decode(
    speech: Speech, streaming: StreamingDecoder
) -> None:
    request = _request(speech, SENTENCE)
    segment, events = _played(streaming, request)
    timing, chunks = _split(events)
    whole = speech.engine.synthesize(request)
    assert timing.samples == whole.size == sum(chunk.audio.size for chunk in chunks)
    assert [chunk.start for chunk in chunks] == list(np.cumsum([0] + [c.audio.size for c in chunks[:-1]]))
    lead = chunks[0].audio
    assert lead.size == (timing.lead_frames - LEAD_DECODED_FRAMES) * FRAME_SAMPLES and not lead.any()
    assert np.abs(whole[: lead.size]).max() < 1e-3  # the whole decode is silent there too
    assert segment.windows >= 2 and len(chunks) == segment.windows + 1


def test_only_a_turns_opening_window_may_run_late_a_later_segments_first_is_on_time(
    speech: Speech, streaming: StreamingDecoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only its own leading silence queued (a turn's opening: nothing plays yet), a segment's first
    window may run past the buffer to leave the steady buffer. With earlier audio still queued it is sized
    like any later window, on time even at OVERRUN × its predicted cost: running late there is a pause
    after speech began."""
    # a fresh cost model at each read: the windows run do not rescale what the next is sized with
    monkeypatch.setattr(StreamingDecoder, "cost", property(lambda _: LinearCost(*LOADED_WINDOW_S)))
    planned = LinearCost(*LOADED_WINDOW_S)
    steady = steady_buffer_s(planned)
    assert steady is not None
    request = _request(speech, SENTENCE)

    start, end, total, lead_s = _first_window(streaming, request, queued_s=0.0)
    opening = next_window_end(start, total, lead_s, planned, left=LEAD_CONTEXT_FRAMES, first=True)
    assert end == opening > next_window_end(start, total, lead_s, planned, left=LEAD_CONTEXT_FRAMES)

    start, end, total, held_s = _first_window(streaming, request, queued_s=0.65 * steady)
    low, high = input_span(start, end, total, left=LEAD_CONTEXT_FRAMES)
    assert OVERRUN * planned.predict(high - low) <= held_s
    assert end < next_window_end(start, total, held_s, planned, left=LEAD_CONTEXT_FRAMES, first=True)


def test_windows_nobody_can_size_are_refused(speech: Speech, streaming: StreamingDecoder) -> None:
    with pytest.raises(ValueError, match="buffered_s or window_frames"):
        streaming.stream(_request(speech, SENTENCE), windowed=True)


def test_cancel_from_another_thread_stops_within_one_window(
    speech: Speech, streaming: StreamingDecoder
) -> None:
    cancel = threading.Event()
    segment = streaming.stream(_request(speech, SENTENCE), cancel=cancel, window_frames=16, windowed=True)
    windows_when_cancelled: list[int] = []

    def consume() -> list[StreamEvent]:
        received = []
        for event in segment:  # runs in a worker thread, as under the scheduler
            received.append(event)
            if len(received) == 3:  # timing, silence, first window
                cancel.set()
                windows_when_cancelled.append(segment.windows)
        return received

    with ThreadPoolExecutor(1) as pool:
        received = pool.submit(consume).result()
    timing, chunks = _split(received)
    assert len(chunks) == 2 and segment.windows == windows_when_cancelled[0] == 1
    assert sum(chunk.audio.size for chunk in chunks) < timing.samples
    assert list(segment) == []  # a cancelled stream stays finished


def test_a_cancel_stops_the_whole_decode_in_progress_and_the_stream_ends_without_its_audio(
    speech: Speech, streaming: StreamingDecoder
) -> None:
    """A :class:`Cancel` set while the vocoder runs ends that run (ONNX Runtime's terminate flag): the
    step that would have given the whole segment's audio gives none. A plain event would let it finish."""
    long_text = " ".join([SENTENCE] * 3)
    cancel = Cancel()
    segment = streaming.stream(_request(speech, long_text), cancel=cancel)
    assert isinstance(next(segment), SegmentTiming)  # stage A
    begun, _ = streaming.stages.runs()
    with ThreadPoolExecutor(1) as pool:
        decoding = pool.submit(next, segment, None)
        deadline = time.monotonic() + 30
        while streaming.stages.runs() != (begun + 1, 1):  # the whole decode has begun and is running
            assert time.monotonic() < deadline and not decoding.done(), "the decode never ran"
            time.sleep(0.005)
        cancel.set()
        assert decoding.result(timeout=30) is None
    assert streaming.stages.runs() == (begun + 1, 0) and list(segment) == []


def test_by_default_timing_comes_right_after_stage_a_and_audio_is_the_whole_decode(
    speech: Speech, streaming: StreamingDecoder
) -> None:
    request = _request(speech, "Short and plain.", voice="am_michael", speed=1.1)
    timing, chunks = _split(list(speech.engine.stream(request)))
    assert len(chunks) == 1 and np.array_equal(chunks[0].audio, speech.engine.synthesize(request))
    assert timing.samples == chunks[0].audio.size


def test_a_segment_longer_than_one_run_may_hold_comes_whole_from_bounded_windows_heard_as_the_whole(
    speech: Speech, streaming: StreamingDecoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a bound on whole decodes, a segment past it still comes as one chunk right after its timing, but
    no vocoder run decodes more of it than the bound (and its context): what one run holds is bounded."""
    stages = streaming.stages
    spans: list[int] = []
    whole_runs: list[int] = []
    window, decode = stages.decode_window, stages.decode

    def recorded_window(front: Front, row: FloatArray, statistics: Statistics, low: int, high: int,
                        options: ort.RunOptions | None = None) -> Audio:  # fmt: skip
        spans.append(high - low)
        return window(front, row, statistics, low, high, options)

    def recorded_decode(
        front: Front, row: FloatArray, options: ort.RunOptions | None = None
    ) -> tuple[Audio, Statistics]:
        whole_runs.append(front.frames)
        return decode(front, row, options)

    monkeypatch.setattr(stages, "decode_window", recorded_window)
    monkeypatch.setattr(stages, "decode", recorded_decode)
    monkeypatch.setattr(streaming, "whole_decode_max_frames", WHOLE_DECODE_MAX_FRAMES)
    request = _request(speech, SENTENCE)
    timing, chunks = _split(list(speech.engine.stream(request)))
    assert timing.frames > WHOLE_DECODE_MAX_FRAMES
    assert whole_runs == [] and len(spans) >= 2
    assert max(spans) <= WHOLE_DECODE_MAX_FRAMES + 2 * CONTEXT_FRAMES
    assert len(chunks) == 1 and chunks[0].audio.size == timing.samples
    against_whole = compare(chunks[0].audio, speech.engine.synthesize(request))
    assert against_whole.distance_db <= TAKE_TO_TAKE_DB
    assert abs(against_whole.level_db) <= TAKE_TO_TAKE_DB


def test_an_uncalibrated_voice_decodes_whole_identically_and_still_has_timing(
    speech: Speech, streaming: StreamingDecoder, tmp_path: Path
) -> None:
    empty = Calibration(streaming.stages, streaming.calibration.model_sha256, tmp_path, background=False)
    fresh = StreamingDecoder(streaming.stages, empty, streaming.costs)
    request = _request(speech, SENTENCE)
    timing, chunks = _split(list(fresh.stream(request, windowed=True, window_frames=16)))
    assert len(chunks) == 1 and np.array_equal(chunks[0].audio, speech.engine.synthesize(request))
    assert timing.samples == chunks[0].audio.size
    assert list(tmp_path.iterdir()) == []  # nothing calibrated behind the caller's back


def test_a_segment_too_short_to_need_windows_decodes_whole_even_when_windowed(
    speech: Speech, streaming: StreamingDecoder
) -> None:
    request = _request(speech, "Short and plain.")
    timing, chunks = _split(_played(streaming, request)[1])
    assert timing.frames < MIN_WINDOWED_FRAMES
    assert len(chunks) == 1 and np.array_equal(chunks[0].audio, speech.engine.synthesize(request))


def test_word_timings_are_ordered_cover_the_audio_and_cut_between_the_right_words(
    speech: Speech, streaming: StreamingDecoder, transcribe: Transcriber
) -> None:
    text = "Please call Stella. Ask her to bring these things."
    (piece,) = speech.phonemize_words(text)
    style = speech.voices.resolve("af_heart")
    timing, chunks = _split(list(streaming.stream(SynthesisRequest(piece.phonemes, style))))
    audio = np.concatenate([chunk.audio for chunk in chunks])
    timed = timing.words(piece.words)
    assert [text[w.text_start : w.text_end] for w in timed] == text.replace(".", "").split()
    assert all(w.start_s < w.end_s for w in timed)
    assert all(a.end_s <= b.start_s for a, b in itertools.pairwise(timed))
    assert timed[0].start_s == pytest.approx(timing.lead_frames * FRAME_SAMPLES / SAMPLE_RATE)
    assert timed[-1].end_s <= audio.size / SAMPLE_RATE
    cut = int(timed[3].start_s * SAMPLE_RATE)  # where "Ask" begins
    pause = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)  # the ASR drops words that start a clip abruptly
    assert words(transcribe(np.concatenate([audio[:cut], pause]))) == ["please", "call", "stella"]
    assert words(transcribe(np.concatenate([pause, audio[cut:]])))[:2] == ["ask", "her"]


def test_phonemize_words_keeps_words_of_every_piece_when_text_is_split(speech: Speech) -> None:
    sentence = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november. "
    text = sentence * 7
    pieces = speech.phonemize_words(text)
    assert len(pieces) >= 2
    spoken = [text[w.text_start : w.text_end] for piece in pieces for w in piece.words]
    assert spoken == text.replace(".", "").split()
    for piece in pieces:
        assert all(0 <= w.phoneme_start < w.phoneme_end <= len(piece.phonemes) for w in piece.words)
