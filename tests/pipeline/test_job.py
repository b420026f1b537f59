"""A segment's parts and its job, on the fake engine: where each part lies, words with the first part."""

from __future__ import annotations

import threading

import numpy as np

from koe.pipeline.job import Part, SegmentJob
from koe.text.segment import Segmenter
from koe.types import SAMPLE_RATE
from support.fake import WINDOW_FRAMES, FakeEngine, fake_speech


def _segment(text: str = "Hello there friend."):  # type: ignore[no-untyped-def]
    segmenter = Segmenter()
    (segment,) = [*segmenter.feed(text), *segmenter.flush()]
    return segment


def test_a_whole_segment_is_one_part_both_first_and_last() -> None:
    whole = Part(_segment(), np.zeros(SAMPLE_RATE, dtype=np.float32), 0.4)
    assert whole.first and whole.last
    assert whole.end_s == 1.0


def test_later_parts_end_where_the_segment_has_got_to() -> None:
    silence = Part(_segment(), np.zeros(6_000, dtype=np.float32), 0.1, (), 0, last=False)
    window = Part(_segment(), np.zeros(18_000, dtype=np.float32), 0.1, (), 6_000, last=True)
    assert silence.first and not silence.last
    assert not window.first and window.last
    assert window.end_s == 1.0  # the last part's end: the segment's duration


def test_a_whole_job_gives_the_segment_and_its_words_in_one_step() -> None:
    speech = fake_speech()
    segment = _segment()
    part = SegmentJob(speech, segment, speech.voice("af_heart"), threading.Event()).step()
    assert part.first and part.last
    assert np.array_equal(part.audio, speech.synthesize(segment.text))
    assert [w.word for w in part.words] == ["Hello", "there", "friend"]
    assert all(0 <= w.start_s < w.end_s <= part.end_s for w in part.words)


#: Long enough to be decoded in windows (a segment under 80 frames decodes whole even then).
LONG = "Please call Stella and ask her to bring these things with her from the store."


def test_a_windowed_job_gives_bounded_parts_that_add_up_to_the_whole() -> None:
    speech = fake_speech()
    segment = _segment(LONG)
    job = SegmentJob(
        speech, segment, speech.voice("af_heart"), threading.Event(), windowed=True, buffered_s=lambda: 0.0
    )
    parts = [job.step()]
    while not parts[-1].last:
        parts.append(job.step())
    assert len(parts) > 1 and all(p.audio.size <= WINDOW_FRAMES * 600 for p in parts)
    assert [p.start for p in parts] == list(np.cumsum([0, *(p.audio.size for p in parts[:-1])]))
    assert parts[0].words and not any(p.words for p in parts[1:])
    short = SegmentJob(speech, _segment(), speech.voice("af_heart"), threading.Event(), windowed=True)
    assert short.step().last  # too short to window: one part
    assert np.array_equal(np.concatenate([p.audio for p in parts]), speech.synthesize(segment.text))


def test_a_cancelled_job_decodes_nothing_more() -> None:
    engine = FakeEngine()
    speech = fake_speech(engine)
    cancel = threading.Event()
    job = SegmentJob(
        speech, _segment(LONG), speech.voice("af_heart"), cancel, windowed=True, buffered_s=lambda: 0.0
    )
    job.step()
    calls = engine.calls
    cancel.set()
    part = job.step()
    assert part.last and part.audio.size == 0 and engine.calls == calls
