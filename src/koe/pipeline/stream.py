"""One turn's text → its segments' audio, in order, through the shared scheduler.

Text is cut as late as possible: a segment is cut only when the scheduler has room for it, after the
segmenter has been told how much text fits in the time the listener's audio buys (short first segments,
longer ones as audio accumulates). Every transport's turns (WebSocket, HTTP, the agent) use this.

Each segment in flight is driven by its own task: it awaits the segment's job, keeps the part, and queues
the next step when the segment is windowed — each step due when the listener would run out of audio (the
audio before it in the listener's queue), so windows of every session interleave by deadline and a long
segment never holds a worker for long. Closing the stream cancels those tasks, and with them the jobs.

A segment the server's cache holds (:mod:`koe.pipeline.cache`) is no job at all: its part is ready the
moment it is cut, and the listener's account, cancellation and words treat it as any other; a segment
decoded to its end uncancelled, whole or in windows, is stored for the next turn that says it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from koe.engine.base import Cancel
from koe.engine.timing import FRAME_SAMPLES
from koe.errors import ConfigError, OverloadedError
from koe.pipeline.cache import CachedSegment, CacheKey, SegmentCache, segment_key
from koe.pipeline.job import Part, SegmentJob
from koe.pipeline.listener import Listener, Progress
from koe.pipeline.speech import Speech
from koe.pipeline.voice import Voice
from koe.pipeline.words import written_words
from koe.scheduler.batch import BatchGroup
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import MIN_RETRY_AFTER_S, Scheduler
from koe.text.boundary import ends_at_pause
from koe.text.languages.lookup import rules_for
from koe.text.normalize import Alignment
from koe.text.segment import MAX_SEGMENT_CHARS, Segment, Segmenter
from koe.text.ssml import PLAIN, Read, Style, is_ssml, located, read
from koe.types import SAMPLE_RATE, Audio

logger = logging.getLogger(__name__)

#: The segmenter is fed a word at a time, so each cut sees the hint set just before it.
_WORD = re.compile(r"\S*\s*")
#: The shortest hint given: below this a cut would land mid-phrase ("Sure, I can help with / that.")
#: for too little gain; a first segment still ends at its first clause or sentence when that is shorter.
MIN_HINT_CHARS = 40
#: A later segment decodes in windows when its whole decode is predicted to take more than this share of
#: the audio the listener has before it (the margin the engine's windows keep too).
LATE_SHARE = 0.7
#: A later segment is cut so that its synthesis is predicted to end within this share of the audio the
#: listener has before it; the rest is margin for what the cost model cannot see coming: another
#: listener's segment starting on the same cores, a neighbour taking a core (docs/benchmarks.md, "Capacity").
HINT_BUDGET_SHARE = 0.6
#: What a malformed SSML turn reads as.
_NOTHING = Read("", Alignment((), ()))
#: The buffered text is compacted once this much of it has been fed (keeps appends O(1) amortized).
_COMPACT_AT_CHARS = 4096
#: Text fed to the segmenter in one go before the event loop gets a turn: segmenting and normalizing run on
#: the loop, at a cost linear in the text, and neither a long text with nothing to cut in it (a code block,
#: a page of symbols) nor one long word (a number of thousands of digits) must hold it. A longest segment's
#: worth: a slice cuts and normalizes about one segment.
FEED_SLICE_CHARS = MAX_SEGMENT_CHARS


def own_chars(english_chars: int, weight: float) -> int:
    """A length of ``english_chars`` English characters in a language whose characters each weigh
    ``weight`` of them (its ``chars_per_char``), at least one."""
    return max(1, round(english_chars / weight))


@dataclass(eq=False, slots=True)
class _InFlight:
    """A segment on its way: its job (none for a cache hit), its place in the listener's account, its parts
    not yet handed out, and the key its audio is stored under with every part's audio so far."""

    job: SegmentJob | None
    progress: Progress
    cancel: threading.Event
    key: CacheKey | None = None
    driver: asyncio.Task[None] | None = None
    ready: deque[Part] = field(default_factory=deque)
    error: BaseException | None = None
    decoded: list[Audio] = field(default_factory=list)


class SegmentStream:
    """Segments of one turn, synthesized in order; fed with :meth:`add`, ended with :meth:`finish`.

    Args:
        speech: the loaded model.
        scheduler: where jobs run; the first job of the stream goes through admission control.
        cost: how long synthesis takes (for deadlines and segment-length hints); fed with each segment.
        voice: the turn's voice.
        listener: the listener's account (shared by a session's turns).
        segmenter: a fresh segmenter for this turn.
        lookahead: segments queued or running at once.
        windowed: each segment a chain of one-window jobs, its audio in parts.
        windowed_first: the turn's first segment so (its first audio then waits for stage A and one
            window, not the whole segment), the others whole unless ``windowed``.
        paced: cut lengths follow the listener's buffer (short first segments); off, segments end where the
            segmenter's own rules end them (a complete body, where nobody waits for the first one).
        cache: the server's segment cache: hits are replayed, segments decoded to their end stored.
        batch: whole segments go to this batch group (:mod:`koe.pipeline.batch`) instead of one job each.
    """

    def __init__(
        self,
        speech: Speech,
        scheduler: Scheduler,
        cost: SegmentCost,
        voice: Voice,
        listener: Listener,
        segmenter: Segmenter,
        *,
        lookahead: int,
        windowed: bool = False,
        windowed_first: bool = False,
        paced: bool = True,
        cache: SegmentCache | None = None,
        batch: BatchGroup[SegmentJob, Part] | None = None,
    ) -> None:
        self._speech = speech
        self._scheduler = scheduler
        self._cost = cost
        self.voice = voice
        self.listener = listener
        self._segmenter = segmenter
        self._lookahead = lookahead
        self._windowed = windowed
        self._windowed_first = windowed or windowed_first
        self._paced = paced
        self._joined = 0  # segments joined into the first: later indices close the gap
        self._batch = None if windowed else batch
        #: the cost model counts English characters; one of this language's is this many of them
        self._weight = rules_for(voice.lang).chars_per_char
        self._cache = cache if cache is not None and cache.enabled else None
        self._buffer = ""
        self._fed = 0
        #: whether the turn's text is SSML (None: its start does not tell yet), and once it is finished, the
        #: SSML and what it reads as (then the buffer holds that text)
        self._ssml: bool | None = None
        self._read: tuple[str, Read] | None = None
        #: an SSML turn's segments spoken in a style of their own (by where they start in the SSML), and the
        #: voice of each style
        self._styles: dict[int, Style] = {}
        self._styled: dict[Style, Voice] = {}
        #: the finished SSML being read in a thread: a read costs time linear in the text, too long for the
        #: event loop on a long text
        self._reading: asyncio.Future[Read | ConfigError] | None = None
        self._cut: deque[Segment] = deque()
        self._in_flight: deque[_InFlight] = deque()
        self._finishing = False
        self._flushed = False
        self._admitted = False
        self._sliced = False  # the segmenter stopped at FEED_SLICE_CHARS with text still to feed
        self._changed = asyncio.Event()
        #: monotonic time the first segment was cut: where time-to-first-audio starts
        self.first_cut_at: float | None = None

    @property
    def working(self) -> bool:
        """Whether the listener is waiting on synthesis: segments cut, queued or running, or text still
        being segmented; not when the turn waits for more text."""
        return bool(self._in_flight or self._cut) or self._sliced or self._reading_ssml

    @property
    def _reading_ssml(self) -> bool:
        return self._reading is not None and self._read is None

    def add(self, text: str) -> None:
        """More text of the turn (any size, any split)."""
        if self._fed >= _COMPACT_AT_CHARS:
            self._buffer, self._fed = self._buffer[self._fed :], 0
        self._buffer += text
        self._changed.set()

    def finish(self) -> None:
        """The turn's text is complete: what remains will be spoken."""
        self._finishing = True
        self._changed.set()

    def start(self) -> None:
        """Pass admission control now (``OverloadedError`` when refused) and submit what can be submitted,
        so that a refusal comes before anything is sent, however long the text takes to segment."""
        if not self._admitted:
            self._scheduler.admit()
            self._admitted = True
        self._fill()

    async def next(self) -> Part | None:
        """The next part of a segment, in order; ``None`` once the finished turn is spoken.

        Raises whatever a job raised (``SynthesisError``...) with the rest of that segment skipped, and
        ``OverloadedError`` when admission refuses the turn's first segment. Cancelling is safe: jobs keep
        their place; call :meth:`close` to drop them.
        """
        while True:
            self._fill()
            if self._in_flight:
                head = self._in_flight[0]
                if head.ready:
                    return self._hand_out(head, head.ready.popleft())
                if head.error is not None:
                    self._drop(self._in_flight.popleft())
                    raise head.error
            elif self._flushed and not self._cut:
                return None
            if self._sliced:  # more text to segment: let the event loop run other work first
                self._sliced = False
                await asyncio.sleep(0)
                continue
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        """Cancel every queued or running job of this turn and drop its unsent parts; idempotent."""
        while self._in_flight:
            self._drop(self._in_flight.popleft())

    def _drop(self, item: _InFlight) -> None:
        item.cancel.set()
        if item.driver is not None:
            item.driver.cancel()
        self.listener.forget(item.progress)

    def _hand_out(self, head: _InFlight, part: Part) -> Part:
        self.listener.handed(head.progress, part.audio.size)
        if part.last:
            self._in_flight.popleft()
            self.listener.forget(head.progress)
            if not part.cached:  # a replay took no synthesis: it says nothing about the machine's speed
                self._cost.observe(self._chars(part.segment), part.end_s, part.took_s)
        return part

    async def _drive(self, item: _InFlight, job: asyncio.Future[Part]) -> None:
        """Await the segment's jobs one after another, keeping each part (or the error) for :meth:`next`."""
        assert item.job is not None  # a cache hit has nothing to drive
        try:
            while True:
                part = await job
                item.ready.append(part)
                if item.key is not None:
                    item.decoded.append(part.audio)
                self.listener.produced(item.progress, part.audio.size)
                self._changed.set()
                if part.last:
                    self._store(item)
                    return
                job = self._scheduler.submit(
                    item.job.step,
                    deadline=self.listener.deadline(item.progress),
                    cost_s=item.job.next_cost_s(),
                )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the stream dropped the segment
            item.error = OverloadedError(  # the scheduler cancelled the job: it is shutting down
                "the server is shutting down", code="shutting_down", retry_after_s=MIN_RETRY_AFTER_S
            )
            self._changed.set()
        except Exception as exc:  # kept for the consumer, which reports it and skips the segment
            item.error = exc
            self._changed.set()

    def _fill(self) -> None:
        while len(self._in_flight) < self._lookahead:
            segment = self._cut_one()
            if segment is None:
                return
            voice = self._voice_of(segment)
            key = segment_key(self._speech.identity, voice, segment.spoken_text) if self._cache else None
            hit = self._cache.get(key) if self._cache is not None and key is not None else None
            if hit is not None:
                self._replay(segment, hit)
                continue
            estimate = self._cost.audio_s(self._chars(segment), voice.speed)
            windowed = self._decode_windowed(segment, estimate)
            progress = self.listener.track(estimate)
            cancel = Cancel()
            job = SegmentJob(
                self._speech,
                segment,
                voice,
                cancel,
                windowed=windowed,
                buffered_s=self.listener.buffered_s if windowed else None,
            )
            due = {"deadline": self.listener.deadline(progress), "cost_s": self._cost.synthesis_s(estimate)}
            try:
                if self._batch is not None and not windowed:  # whole segments share engine calls
                    first = self._scheduler.submit_batched(job, self._batch, **due, admit=not self._admitted)
                else:
                    first = self._scheduler.submit(job.step, **due, admit=not self._admitted)
            except BaseException:
                self.listener.forget(progress)
                raise
            self._admitted = True
            item = _InFlight(job, progress, cancel, key=key)
            item.driver = asyncio.get_running_loop().create_task(
                self._drive(item, first), name=f"koe-segment-{segment.index}"
            )
            self._in_flight.append(item)

    def _decode_windowed(self, segment: Segment, estimate_s: float) -> bool:
        """Whether ``segment`` (``estimate_s`` of audio) decodes in windows: every segment when the stream
        windows all; the first when it windows the first and no other turn has work on the engine
        (:meth:`_window_first`); a later one when its whole decode would not be done within
        :data:`LATE_SHARE` of the audio the listener has before it — windowed, its first audio comes after
        stage A and one window instead of after all of it — unless other turns' jobs fill every worker: a
        window then waits for a whole decode to end before each step, and its listener starves while theirs
        do not."""
        if self._windowed:
            return True
        if segment.index == 0:
            return self._window_first()
        if not self._windowed_first or self._others_jobs() >= self._scheduler.workers:
            return False
        return self._cost.synthesis_s(estimate_s) > LATE_SHARE * self.listener.budget_s()

    def _window_first(self) -> bool:
        """Whether the turn's first segment decodes in windows: when the stream windows first segments and
        the engine is this turn's alone. On a shared engine the windows' extra work slows the other turns'
        segments and leaves the first segment's own decode ending as its audio runs out, with no time for the
        second: decoded whole, its audio comes later (a second listener's first word waits for it) and the
        second segment has all of it to be made in."""
        return self._windowed_first and not self._others_jobs()

    def _others_jobs(self) -> int:
        """Other turns' jobs queued or running. Each of this turn's unfinished segments has at most one job
        queued or running."""
        own = sum(1 for item in self._in_flight if item.driver is not None and not item.driver.done())
        stats = self._scheduler.stats
        return max(0, stats.queued + stats.running - own)

    def _replay(self, segment: Segment, hit: CachedSegment) -> None:
        """A cached segment: ready now, with its words pointed at this turn's text as a synthesis's are."""
        if not self._admitted:  # the turn is admitted (or refused) as if its first job were queued
            self._scheduler.admit()
            self._admitted = True
        part = Part(segment, hit.audio.copy(), 0.0, written_words(segment, hit.timings), cached=True)
        item = _InFlight(None, self.listener.track(part.audio.size / SAMPLE_RATE), threading.Event())
        item.ready.append(part)
        self.listener.produced(item.progress, part.audio.size)
        self._in_flight.append(item)

    def _store(self, item: _InFlight) -> None:
        """Keep the audio of a segment that ran to its end, whole or windowed: what the listener was sent,
        its parts joined, less a windowed opening's lead (kept only to cover decoding, it would delay a
        replay's first word and pause a later segment's), with its words timed from what is kept. A
        cancelled segment may be cut short, so it is not kept."""
        cache, key, job = self._cache, item.key, item.job
        if cache is None or key is None or job is None or item.cancel.is_set():
            return
        lead = job.lead_samples
        audio = np.concatenate(item.decoded)[lead:]
        shift_s = lead / SAMPLE_RATE
        timings = [replace(t, start_s=t.start_s - shift_s, end_s=t.end_s - shift_s) for t in job.timings]
        cache.put(key, audio, timings)

    def _cut_one(self) -> Segment | None:
        if not self._cut:
            # every turn's first segment is cut within the hint, windowed or not: streamed text would
            # otherwise keep the listener waiting for its first sentence to end; a later segment that
            # decodes in windows starts as soon as a short one would, so it has none
            later_windowed = self._windowed and self.first_cut_at is not None
            if self._paced and not later_windowed:
                budget_s = HINT_BUDGET_SHARE * self.listener.budget_s()
                hint = max(MIN_HINT_CHARS, self._cost.chars_within(budget_s, self.voice.speed))
                self._segmenter.set_next_limit(own_chars(hint, self._weight))
            if not self._feed():
                return None
        if not self._cut:
            return None
        segment = self._cut.popleft()
        if self.first_cut_at is None:
            self.first_cut_at = time.monotonic()
            if self._window_first():
                segment = self._long_enough_to_window(segment)
        elif self._joined:
            segment = replace(segment, index=segment.index - self._joined)
        return segment

    def _feed(self) -> bool:
        """Feed the buffered text a word at a time until a segment is cut or the text runs out (flushing a
        finished turn); ``False`` when this call's slice of text is used up (the rest waits for the next).
        A word longer than what is left of the slice is fed in parts, as streamed tokens would be."""
        if not self._readable():
            return True
        slice_end = self._fed + FEED_SLICE_CHARS
        while not self._cut and self._fed < len(self._buffer):
            if self._fed >= slice_end:
                self._sliced = True
                return False
            word = _WORD.match(self._buffer, self._fed, slice_end)
            assert word is not None  # the pattern matches at least one character before the end
            self._fed = word.end()
            self._cut.extend(self._located(self._segmenter.feed(word.group())))
        if not self._cut and self._finishing and not self._flushed:
            self._flushed = True
            self._cut.extend(self._located(self._segmenter.flush()))
        return True

    def _readable(self) -> bool:
        """Whether the buffer holds text to segment: plain text at once; SSML (:mod:`koe.text.ssml`) once
        the turn is finished, read whole then (its elements' meaning can depend on their end tags).

        Raises:
            ConfigError: ``invalid_markup``: the SSML is malformed (the turn then has nothing to say).
        """
        if self._ssml is None:
            self._ssml = is_ssml(self._buffer)
            if self._ssml is None:
                if not self._finishing:
                    return False
                self._ssml = False
        if not self._ssml or self._read is not None:
            return True
        if not self._finishing:
            return False
        if self._reading is None:
            self._reading = asyncio.get_running_loop().run_in_executor(None, _read_or_error, self._buffer)
            self._reading.add_done_callback(lambda _: self._changed.set())
        if not self._reading.done():
            return False
        ssml, said = self._buffer, self._reading.result()
        # malformed, the turn says nothing: the error is raised once, then the turn ends
        self._read, self._buffer, self._fed = (ssml, _NOTHING), "", 0
        if isinstance(said, ConfigError):
            raise said
        styles = {style for _, style in said.styles if style != PLAIN}
        self._styled = {style: self._speech.styled(self.voice, style) for style in styles}
        self._read, self._buffer = (ssml, said), said.text
        return True

    def _located(self, segments: list[Segment]) -> list[Segment]:
        """``segments`` pointed at the turn's text as sent: an SSML turn's, at its SSML."""
        if self._read is None:
            return segments
        ssml, said = self._read
        out = []
        for segment in segments:
            style = said.style_at(segment.source_span[0])
            out.append(located(segment, said, ssml))
            if style != PLAIN:
                self._styles[out[-1].source_span[0]] = style
        return out

    def _voice_of(self, segment: Segment) -> Voice:
        """The voice ``segment`` is spoken in: the turn's, or its SSML style's."""
        style = self._styles.get(segment.source_span[0])
        return self.voice if style is None else self._styled[style]

    def _long_enough_to_window(self, first: Segment) -> Segment:
        """``first`` joined with the segments after it that the text already holds while it is too short
        for the engine to window (decoded whole, its first audio would wait for all of it), or while it
        ends inside a phrase (the hint cut it there, and the rest of the phrase is already here): decoded in
        windows, the longer segment is heard as soon, and as one utterance. Streamed text seldom holds the
        next segment yet, so this joins where a text came whole; a first segment the cache holds is kept
        (its replay is sooner still).

        What is joined is cut short (:data:`MIN_HINT_CHARS`), so that it ends at its first clause where it
        has one: stage A runs on the whole utterance before its first window, at a cost per frame, so each
        second of audio joined beyond what windowing needs delays the first word. A cut that
        lands inside a phrase is joined with what follows it, so the utterance still ends at a pause — but
        never past the segmenter's hard maximum (:attr:`Segmenter.max_chars`): text with no pause in it (a
        number thousands of digits long) would otherwise become one segment, whose G2P no cancel reaches.
        """
        voice = self._voice_of(first)
        key = segment_key(self._speech.identity, voice, first.spoken_text)
        if self._cache is not None and key in self._cache:
            return first
        frames = self._speech.engine.capabilities.min_windowed_frames
        shortest_s = frames * FRAME_SAMPLES / SAMPLE_RATE
        self._segmenter.set_next_limit(own_chars(MIN_HINT_CHARS, self._weight))
        try:
            while self._cost.audio_s(self._chars(first), voice.speed) < shortest_s or not ends_at_pause(
                first.spoken_text
            ):
                if not self._cut and not self._feed():
                    break  # this call's slice of text is used up
                if not self._cut:
                    break  # the text holds no next segment yet
                if len(first.text) + 1 + len(self._cut[0].text) > self._segmenter.max_chars:
                    break  # text without a pause (a long number) is not joined past a segment's limit
                if self._voice_of(self._cut[0]) is not voice:
                    break  # an SSML span in another style is spoken by another voice
                first = first.joined(self._cut.popleft())
                self._joined += 1
        finally:
            self._segmenter.set_next_limit(None)
        return first

    def _chars(self, segment: Segment) -> int:
        """The segment's length in English characters of speech (what the cost model counts)."""
        return round(len(segment.spoken_text) * self._weight)


def _read_or_error(ssml: str) -> Read | ConfigError:
    """:func:`koe.text.ssml.read` in a worker thread, its ``ConfigError`` returned for the loop to raise (a
    future's exception that nobody retrieves, the turn closed meanwhile, would be logged as an error)."""
    try:
        return read(ssml)
    except ConfigError as exc:
        return exc
