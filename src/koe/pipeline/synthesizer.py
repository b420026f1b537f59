"""The loaded model and the shared scheduler: what every transport opens its turns' streams from.

One :class:`Synthesizer` per server. It is also the one place that decides whether a turn's segments are
decoded in windows: when the server asks for it (``Settings.windowed`` for every segment,
``Settings.windowed_first`` for a turn's first, and for a later one its stream finds would come late),
the engine can (``capabilities.windowed``), and the transport plays audio as it arrives (not a complete
file). Segments that decode whole share engine calls
across sessions when the server was given a batch group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koe.pipeline.cache import SegmentCache
from koe.pipeline.job import Part, SegmentJob
from koe.pipeline.listener import Listener
from koe.pipeline.speaker import Observer, Speaker
from koe.pipeline.speech import Speech
from koe.pipeline.stream import SegmentStream
from koe.pipeline.voice import Voice
from koe.scheduler.batch import BatchGroup
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import Scheduler
from koe.text.languages.lookup import segmenter_for


@dataclass(frozen=True, slots=True)
class Synthesizer:
    """Everything a turn's synthesis shares with every other turn of the server.

    Attributes:
        speech: the loaded model.
        scheduler: the worker threads, earliest playback deadline first.
        cost: the segment cost model, fed by every finished segment.
        observer: the metrics.
        lookahead: segments of one turn queued or running at once.
        windowed: streamed segments decode in windows, where the engine can.
        windowed_first: a streamed turn's first segment does (its first audio then comes after stage A and
            one window instead of the whole segment; docs/engine.md says what it costs in quality), and so
            does a later one whose whole decode would come late.
        cache: segments said before, shared by every turn (disabled unless given).
        batch: whole segments of every turn share engine calls in this group (an engine that shares
            passes; :func:`koe.pipeline.batch.segment_batches`); ``None``: one job per segment.
    """

    speech: Speech
    scheduler: Scheduler
    cost: SegmentCost
    observer: Observer
    lookahead: int = 1
    windowed: bool = False
    windowed_first: bool = False
    cache: SegmentCache = field(default_factory=lambda: SegmentCache(0))
    batch: BatchGroup[SegmentJob, Part] | None = None

    def voice(
        self, spec: str, speed: float = 1.0, lang: str | None = None, lexicon: Mapping[str, Any] | None = None
    ) -> Voice:
        """Raises ``VoiceError`` or ``ConfigError`` for a bad voice, speed, accent or lexicon."""
        return self.speech.voice(spec, speed, lang, lexicon)

    @property
    def first_windowed(self) -> bool:
        """A streamed turn's first segment decodes in windows (it is cut as every turn's first segment is)."""
        return (self.windowed or self.windowed_first) and self.speech.engine.capabilities.windowed

    def stream(self, voice: Voice, listener: Listener, *, complete: bool = False) -> SegmentStream:
        """A new turn's stream for ``listener``; ``complete`` when the transport sends one complete body
        (nothing is heard before the end: segments are cut where the text's own boundaries fall, never
        shortened for an early start, and decoded whole, so the audio is what the streamed turn's would be
        at its best)."""
        streamed = not complete
        return SegmentStream(
            self.speech,
            self.scheduler,
            self.cost,
            voice,
            listener,
            segmenter_for(voice.lang),
            lookahead=self.lookahead,
            windowed=streamed and self.windowed and self.speech.engine.capabilities.windowed,
            windowed_first=streamed and self.first_windowed,
            paced=not complete,
            cache=self.cache,
            batch=self.batch,
        )

    def speaker(self, stream: SegmentStream, transport: str, *, started_at: float | None = None) -> Speaker:
        """The consume loop of ``stream`` for ``transport`` (see :class:`Speaker`)."""
        return Speaker(stream, self.observer, transport, started_at=started_at)
