"""Where the engine shares passes (the torch engine on a GPU), a streamed turn's next segment is read by G2P
while the engine's call for the segment before it is still running: G2P is off the engine's critical path
(the segment is prepared on a worker of its own, then boards a call). On the scripted fake engine and G2P,
waiting on events: the first call does not end until the second segment's G2P has, and that G2P does not
end until the call has begun. A control on one worker, where G2P can only wait for the call, proves the
check can fail."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from koe.engine.base import CancelCheck, SynthesisRequest, Utterance
from koe.g2p.base import WordSpan
from koe.pipeline.batch import segment_batches
from koe.pipeline.job import Part
from koe.pipeline.listener import Listener
from koe.pipeline.speech import Speech
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from support.fake import FakeEngine, FakeG2P, fake_voices
from support.streaming import every_part

TEXT = "The first sentence of the answer is spoken while the next one is read. Then the second follows."
#: Long enough for a thread hand-off on a loaded machine; reached only when G2P and calls are serialized.
OVERLAP_WAIT_S = 10.0
#: The control's wait: there the wait always runs out, so it is kept short.
SERIAL_WAIT_S = 0.3


class _HeldEngine(FakeEngine):
    """Shares passes; its first call begins, then waits for the turn's second segment's G2P to end."""

    def __init__(self, g2p_done: threading.Event, wait_s: float) -> None:
        super().__init__(max_batch=4, windowed=False)  # as the torch engine: shares passes, never windows
        self.call_began = threading.Event()
        self.g2p_done = g2p_done
        self.wait_s = wait_s
        self.overlapped: bool | None = None  # whether the second G2P ended during the first call

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Utterance]:
        if self.overlapped is None:
            self.call_began.set()
            self.overlapped = self.g2p_done.wait(self.wait_s)
        return super().synthesize_batch(requests, is_cancelled)


class _SlowG2P(FakeG2P):
    """Reads its second text (the turn's second segment) only once the engine's first call has begun, then
    says it is done."""

    def __init__(self, engine_began: threading.Event, done: threading.Event, wait_s: float) -> None:
        super().__init__("en-us")
        self.engine_began = engine_began
        self.done = done
        self.wait_s = wait_s
        self.read_during_call: bool | None = None
        self._reads = 0
        self._lock = threading.Lock()

    def phonemize_words(self, text: str) -> tuple[str, list[WordSpan]]:
        with self._lock:
            self._reads += 1
            second = self._reads == 2
        if not second:
            return super().phonemize_words(text)
        self.read_during_call = self.engine_began.wait(self.wait_s)
        read = super().phonemize_words(text)
        self.done.set()
        return read


class _Unobserved:
    def synthesized(self, took_s: float, audio_s: float) -> None:
        """Not measured here."""

    def first_audio(self, transport: str, latency_s: float) -> None:
        """Not measured here."""


def _spoken(workers: int, wait_s: float) -> tuple[_HeldEngine, _SlowG2P, list[Part]]:
    """:data:`TEXT` streamed a word at a time as one turn, through shared calls on ``workers`` workers; the
    engine's first call and the second G2P each wait up to ``wait_s`` for the other."""
    g2p_done = threading.Event()
    engine = _HeldEngine(g2p_done, wait_s)
    g2p = _SlowG2P(engine.call_began, g2p_done, wait_s)
    speech = Speech(engine, fake_voices(), {"en-us": g2p})
    synthesizer = Synthesizer(
        speech,
        Scheduler(workers, 64),
        SegmentCost(),
        _Unobserved(),
        lookahead=2,
        batch=segment_batches(engine, 4),
    )

    async def main() -> list[Part]:
        stream = synthesizer.stream(synthesizer.voice("af_heart"), Listener())
        for word in TEXT.split(" "):
            stream.add(word + " ")
        stream.finish()
        try:
            return await every_part(stream)
        finally:
            await synthesizer.scheduler.aclose(5.0)

    return engine, g2p, asyncio.run(main())


def test_the_next_segments_g2p_runs_while_the_engine_call_before_it_runs() -> None:
    engine, g2p, parts = _spoken(workers=2, wait_s=OVERLAP_WAIT_S)
    assert g2p.read_during_call is True  # the second segment's G2P began after the first call had
    assert engine.overlapped is True  # and ended before that call did
    assert engine.batches[0] == 1  # the second segment was not ready to board the first call
    assert len(parts) >= 2 and all(part.audio.size for part in parts)
    assert " ".join(part.segment.spoken_text for part in parts) == TEXT  # every segment spoken, in order


def test_on_one_worker_the_next_segments_g2p_waits_for_the_call_and_the_check_sees_it() -> None:
    engine, g2p, parts = _spoken(workers=1, wait_s=SERIAL_WAIT_S)
    assert engine.overlapped is False  # the call holds the only worker: no G2P could run during it
    assert g2p.read_during_call is True  # the second G2P ran once the call had begun (and ended)
    assert " ".join(part.segment.spoken_text for part in parts) == TEXT  # serialized, still all spoken
