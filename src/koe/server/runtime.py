"""What every route shares: settings, metrics, admission, and the loaded :class:`Synthesizer`.

The model loads in a worker thread after the server starts listening, so ``/ping`` can answer 503 while it
loads and 200 once it is loaded *and* proven (SageMaker sends traffic only after a 200; the warm-up:
:mod:`koe.server.warmup`). What only makes it faster starts after that, in the background: measuring this
machine's costs where no earlier start kept them (:mod:`koe.server.measurement`), and pre-warming the
segment cache (``KOE_PRECACHE``, :mod:`koe.pipeline.precache`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial

from koe.engine.assets import cache_dir
from koe.errors import OverloadedError
from koe.machine import MEASURED_DIR, Measured
from koe.pipeline.batch import segment_batches
from koe.pipeline.cache import SegmentCache
from koe.pipeline.job import Part, SegmentJob
from koe.pipeline.precache import parse_openers, precache
from koe.pipeline.speech import Speech, SpeechOptions, installed_langs
from koe.pipeline.synthesizer import Synthesizer
from koe.scheduler.batch import BatchGroup
from koe.scheduler.capacity import Capacity
from koe.scheduler.cost import SegmentCost
from koe.scheduler.queue import MIN_RETRY_AFTER_S, Scheduler
from koe.server.measurement import TIMED, CostMeasurement
from koe.server.metrics import Metrics
from koe.server.voices import openai_voices
from koe.server.warmup import freeze_loaded_objects, import_first_use_modules, prove, prove_engine
from koe.settings import Settings

logger = logging.getLogger(__name__)

#: Transports whose connections are sessions: they share the ``max_sessions`` slots.
SESSION_TRANSPORTS = ("ws", "wyoming")
#: Complete files (``stream: false``, FLAC, timestamps) encoded at once, off the event loop; more wait for
#: a thread. Encoding competes with synthesis for the CPU, so few.
ENCODE_THREADS = 2


def load_in_background(settings: Settings) -> Future[Speech]:
    """The model of ``settings``, loading from now on in a daemon thread (an exit does not wait for it):
    ``koe serve`` starts it before it imports the web stack, so the two overlap."""
    loading: Future[Speech] = Future()

    def load() -> None:
        try:
            loading.set_result(load_proven(settings))
        except BaseException as exc:  # the runtime's load reports it, as if it had loaded the model itself
            loading.set_exception(exc)

    threading.Thread(target=load, name="koe-load", daemon=True).start()
    return loading


def load_proven(settings: Settings, *, prove: bool = True) -> Speech:
    """The model of ``settings``, its engine's part of the warm-up proven while the G2P was being built
    (:func:`koe.server.warmup.prove_engine`) unless ``prove`` is false. Every installed language's G2P is
    built with it unless ``settings.lazy_g2p``: a build holds the GIL for up to seconds at a time (imports,
    dictionaries), which on a serving process is a stall of every session's event loop."""
    proof = partial(prove_engine, voice=settings.default_voice)
    options = SpeechOptions.from_settings(settings, warmup=False)
    if not settings.lazy_g2p:
        options = replace(options, langs=installed_langs())
    return Speech.load(options, beside_g2p=proof if prove else None)


class Runtime:
    """Server-wide state, created by ``create_app`` and started by its lifespan."""

    def __init__(
        self,
        settings: Settings,
        speech: Speech | None = None,
        loading: Future[Speech] | None = None,
        *,
        cost: SegmentCost | None = None,
    ) -> None:
        """``speech``: a model loaded elsewhere (tests, benchmarks); ``loading``: the model of ``settings``,
        already loading (:func:`load_in_background`); neither: it is loaded when the server starts.
        ``cost``: the segment costs to plan with where the caller knows them (tests sharing one warm
        model): the model is then neither proven nor measured before ``/ping`` is 200.

        Raises ``ConfigError`` for a ``KOE_PRECACHE`` file that cannot be used."""
        self.settings = settings
        self._known_cost = cost
        self.openai_voices = openai_voices(settings.openai_voices)  # a bad setting stops the start here
        self.cache = SegmentCache.of_megabytes(settings.segment_cache_mb)
        self.metrics = Metrics(
            lambda: self.scheduler.stats, lambda: self.cache.stats, lambda: self.capacity.stats
        )
        self.scheduler = Scheduler(
            settings.layout.workers,
            settings.max_queued_jobs,
            batch_window_s=settings.batch_window_s,
            observer=self.metrics,
        )
        #: sessions and requests admitted by what the machine makes per second (each session's first turn)
        layout = settings.layout
        self.capacity = Capacity(
            min(layout.cores, layout.workers * layout.threads),
            settings.capacity_share,
            self.scheduler.retry_after_s,
        )
        self._openers = parse_openers(settings.precache, settings.default_voice)
        self._given = speech
        self._preloading = loading
        self._synthesizer: Synthesizer | None = None
        self.load_error: str | None = None
        self._loading: asyncio.Task[None] | None = None
        #: what measures this machine's costs once the server is ready, where nothing kept them
        self._measure_after: Callable[[], Awaitable[bool]] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._open = {"ws": 0, "wyoming": 0, "http": 0}
        self._closing = False
        #: where complete files are encoded (:mod:`koe.server.responses`); threads start on first use
        self.encoders = ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="koe-encode")

    @property
    def ready(self) -> bool:
        return self._synthesizer is not None and not self._closing

    @property
    def status(self) -> str:
        """``ready``, ``loading``, ``failed`` (loading failed: :attr:`load_error` says so) or ``stopping``."""
        if self._closing:
            return "stopping"
        if self._synthesizer is not None:
            return "ready"
        return "failed" if self.load_error is not None else "loading"

    def start(self) -> None:
        """Begin loading in the background (returns at once)."""
        self._loading = asyncio.create_task(self._load(), name="koe-load")

    async def loaded(self) -> None:
        """Wait until loading has ended, ready or failed (:attr:`status` says which); at once when it has
        not begun. Cancelling is safe: loading goes on."""
        if self._loading is not None:
            await asyncio.wait([self._loading])

    async def _load(self) -> None:
        try:
            self._synthesizer = await asyncio.to_thread(self._load_blocking)
        except Exception as exc:  # a broken install must show in the log and in /ping, not kill the server
            logger.exception("loading the model failed; /ping stays 503")
            # what clients are told: the kind of failure only (the message holds paths; the log has it)
            self.load_error = f"loading the model failed ({type(exc).__name__}); the server's log says why"
            return
        if self._closing:
            return
        if self._measure_after is not None:
            measuring = asyncio.create_task(self._measure(self._measure_after), name="koe-measure")
            self._background.append(measuring)
        if self._openers:
            self._background.append(
                asyncio.create_task(self._precache(self._synthesizer), name="koe-precache")
            )

    async def _measure(self, measure: Callable[[], Awaitable[bool]]) -> None:
        try:
            measured = await measure()
        except Exception:  # the costs are an optimization: a failure is logged, the server serves on
            logger.exception("measuring this machine's costs failed; the server speaks on from its defaults")
            return
        self.metrics.costs_measured.set(measured)

    async def _precache(self, synthesizer: Synthesizer) -> None:
        try:
            await precache(synthesizer, self._openers)
        except Exception:  # pre-warming is an optimization: a failure is logged, the server serves on
            logger.exception("pre-warming the segment cache failed")

    def _load_blocking(self) -> Synthesizer:
        started = time.perf_counter()
        import_first_use_modules()
        if self._given is not None:
            speech = self._given
        elif self._preloading is not None:
            speech = self._preloading.result()
        else:
            speech = load_proven(self.settings, prove=self._known_cost is None)
        if self.settings.windowed and not speech.engine.capabilities.windowed:
            logger.warning(
                "windowed decoding: the %s engine cannot window; segments decode whole", speech.engine.name
            )
        cost = self._warm_up(speech) if self._known_cost is None else self._known_cost
        self.metrics.costs_measured.set(self._known_cost is None and self._measure_after is None)
        logger.info(
            "ready in %.1f s (%s): %s", time.perf_counter() - started, speech.engine.description, cost
        )
        if self._given is None:  # a model handed in belongs to a caller (tests, benchmarks): theirs to keep
            freeze_loaded_objects()
        return Synthesizer(
            speech,
            self.scheduler,
            cost,
            _Measured(self.metrics, self.capacity),
            lookahead=self.settings.segments_ahead,
            windowed=self.settings.windowed,
            windowed_first=self.settings.windowed_first,
            cache=self.cache,
            batch=self._batches(speech),
        )

    def _batches(self, speech: Speech) -> BatchGroup[SegmentJob, Part] | None:
        """Shared engine calls where the engine shares passes and the settings allow more than one."""
        size = min(self.settings.batch_max_segments, speech.engine.capabilities.max_batch)
        if size <= 1:
            return None
        logger.info(
            "whole segments share %s engine calls: up to %d per call, waiting at most %.0f ms for more",
            speech.engine.name, size, self.settings.batch_window_s * 1000,
        )  # fmt: skip
        return segment_batches(speech.engine, size)

    def _warm_up(self, speech: Speech) -> SegmentCost:
        """Prove the text path; the costs to start from. A model handed in (tests, benchmarks in process) is
        measured afresh before the server is ready: its identity may not name all that sets its speed. A
        model this server loaded itself starts from what an earlier start on this machine measured, and
        where none did, from the defaults, measured once the server is ready, while no session or request
        is open (:attr:`_measure_after`), or now, without ``measure_after_ready``."""
        voice = self.settings.default_voice
        windowed = self.settings.windowed or self.settings.windowed_first
        # a model this server loaded had its engine proven beside the G2P's build (load_proven)
        prove(speech, voice, engine_proven=self._given is None)
        if self._given is not None:
            return CostMeasurement(speech, voice, windowed, None).now()
        key = {
            "what": "segment costs", "texts": list(TIMED), "speech": speech.identity,
            "engine": speech.engine.description, "voice": voice,
        }  # fmt: skip
        measurement = CostMeasurement(speech, voice, windowed, Measured(cache_dir() / MEASURED_DIR, key))
        kept = measurement.kept()
        if kept is not None and measurement.prepare():  # a later start: nothing to measure
            return kept
        if not self.settings.measure_after_ready:
            return measurement.now()
        cost = kept or SegmentCost()
        self._measure_after = partial(
            measurement.when_idle, self.scheduler, cost, self._nothing_open, time_utterances=kept is None
        )
        return cost

    def _nothing_open(self) -> bool:
        """No session or request is open (read on the event loop)."""
        return not any(self._open.values())

    def synthesizer(self) -> Synthesizer:
        """The loaded model, or an ``OverloadedError`` (``not_ready`` / ``shutting_down``) to send back."""
        if self._closing:
            raise OverloadedError(
                "the server is shutting down", code="shutting_down", retry_after_s=MIN_RETRY_AFTER_S
            )
        if self._synthesizer is None:
            raise OverloadedError(
                self.load_error or "the model is still loading",
                code="not_ready",
                retry_after_s=MIN_RETRY_AFTER_S,
            )
        return self._synthesizer

    @contextmanager
    def admitted(self, transport: str) -> Iterator[Synthesizer]:
        """Hold one of the ``transport``'s slots while inside: ``"ws"`` and ``"wyoming"`` sessions share the
        ``max_sessions`` slots, ``"http"`` requests have their own.

        Raises:
            OverloadedError: not ready, shutting down, or every slot taken (``too_many_sessions``).
        """
        synthesizer = self.synthesizer()
        session = transport in SESSION_TRANSPORTS
        limit = self.settings.max_sessions if session else self.settings.max_http_requests
        taken = sum(self._open[t] for t in SESSION_TRANSPORTS) if session else self._open[transport]
        if taken >= limit:
            raise OverloadedError(
                f"all {limit} {'sessions' if session else 'request slots'} are in use; retry later",
                code="too_many_sessions",
                retry_after_s=self.scheduler.retry_after_s(),
            )
        self._open[transport] += 1
        self.metrics.sessions.labels(transport).inc()
        self.metrics.sessions_total.labels(transport).inc()
        try:
            yield synthesizer
        finally:
            self._open[transport] -= 1
            self.metrics.sessions.labels(transport).dec()

    async def aclose(self) -> None:
        """Refuse new work, stop loading, drain the scheduler for a bounded time; idempotent."""
        self._closing = True
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()  # the load thread finishes on its own; its result is dropped
        for task in self._background:
            task.cancel()
        await self.scheduler.aclose(self.settings.shutdown_grace_s)
        self.encoders.shutdown(wait=False, cancel_futures=True)  # a running encoding finishes on its own


class _Measured:
    """What the speakers measure, told to the metrics and, for each segment made, to admission's meter."""

    def __init__(self, metrics: Metrics, capacity: Capacity) -> None:
        self._metrics = metrics
        self._capacity = capacity

    def synthesized(self, took_s: float, audio_s: float) -> None:
        self._metrics.synthesized(took_s, audio_s)
        self._capacity.made(audio_s)

    def first_audio(self, transport: str, latency_s: float) -> None:
        self._metrics.first_audio(transport, latency_s)
