"""Prometheus metrics of one app, in the app's own registry (so tests can run several apps at once)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koe.pipeline.cache import CacheStats
from koe.scheduler.capacity import CapacityStats
from koe.scheduler.queue import SchedulerStats

_LATENCY_BUCKETS_S = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
_RTF_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.5, 2.0, 5.0)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
_CALL_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class _SchedulerCollector(Collector):
    """Reads the scheduler's own counters at scrape time, so they are never out of step with it."""

    def __init__(self, stats: Callable[[], SchedulerStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        yield GaugeMetricFamily("koe_queue_depth", "Synthesis jobs waiting for a worker", value=stats.queued)
        yield GaugeMetricFamily("koe_jobs_running", "Synthesis jobs running on a worker", value=stats.running)
        jobs = CounterMetricFamily("koe_jobs", "Synthesis jobs by outcome", labels=["outcome"])
        for outcome in ("completed", "failed", "dropped", "discarded", "refused"):
            jobs.add_metric([outcome], getattr(stats, outcome))
        yield jobs


class _CacheCollector(Collector):
    """Reads the segment cache's counters at scrape time."""

    def __init__(self, stats: Callable[[], CacheStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        lookups = CounterMetricFamily(
            "koe_segment_cache_lookups", "Segment cache lookups by result", labels=["result"]
        )
        lookups.add_metric(["hit"], stats.hits)
        lookups.add_metric(["miss"], stats.misses)
        yield lookups
        yield CounterMetricFamily(
            "koe_segment_cache_stores", "Segments stored in the cache", value=stats.stores
        )
        yield CounterMetricFamily(
            "koe_segment_cache_evictions", "Segments evicted to make room", value=stats.evictions
        )
        yield GaugeMetricFamily("koe_segment_cache_entries", "Segments held", value=stats.entries)
        yield GaugeMetricFamily(
            "koe_segment_cache_bytes", "Bytes held (audio and overhead)", value=stats.bytes
        )
        yield GaugeMetricFamily(
            "koe_segment_cache_capacity_bytes", "The cache's bound in bytes", value=stats.capacity_bytes
        )


class _CapacityCollector(Collector):
    """Reads admission's account at scrape time: what a newcomer would be judged on now."""

    def __init__(self, stats: Callable[[], CapacityStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        yield GaugeMetricFamily(
            "koe_listeners_speaking", "Sessions and requests whose audio is being made", value=stats.speaking
        )
        if stats.supply is not None:  # absent until the meter's first window has closed
            yield GaugeMetricFamily(
                "koe_capacity_audio_per_second",
                "Audio-seconds per second the machine makes: its cores times the audio made per CPU-second",
                value=stats.supply,
            )


class Metrics:
    """Every metric koe exports; see docs/operations.md, "Metrics", for their meaning."""

    def __init__(
        self,
        scheduler_stats: Callable[[], SchedulerStats],
        cache_stats: Callable[[], CacheStats],
        capacity_stats: Callable[[], CapacityStats],
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.time_to_first_audio = Histogram(
            "koe_time_to_first_audio_seconds",
            "From a turn's first segment being ready (or a request arriving) to its first audio sent",
            ["transport"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.synthesis = Histogram(
            "koe_synthesis_seconds",
            "Wall time of one segment's synthesis",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.rtf = Histogram(
            "koe_real_time_factor",
            "Synthesis time over audio duration, per segment",
            buckets=_RTF_BUCKETS,
            registry=r,
        )
        self.audio = Counter("koe_audio_seconds", "Seconds of audio synthesized", registry=r)
        self.segments = Counter("koe_segments", "Segments synthesized", registry=r)
        self.turns = Counter("koe_turns", "Turns finished, by outcome", ["outcome"], registry=r)
        self.cancels = Counter("koe_cancels", "Cancel (barge-in) messages acted on", registry=r)
        self.errors = Counter("koe_errors", "Errors reported to clients, by code", ["code"], registry=r)
        self.sessions = Gauge(
            "koe_active_sessions", "Open sessions and streaming requests", ["transport"], registry=r
        )
        self.sessions_total = Counter(
            "koe_sessions", "Sessions and requests accepted", ["transport"], registry=r
        )
        self.batch_size = Histogram(
            "koe_batch_size",
            "Segments per shared engine call (engines that share passes)",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.engine_calls = Histogram(
            "koe_engine_call_seconds",
            "Wall time of one shared engine call, by its number of segments",
            ["batch_size"],
            buckets=_CALL_BUCKETS_S,
            registry=r,
        )
        self.costs_measured = Gauge(
            "koe_costs_measured",
            "1 once the scheduler and the engine plan with this machine's measured costs, 0 on defaults",
            registry=r,
        )
        r.register(_SchedulerCollector(scheduler_stats))
        r.register(_CacheCollector(cache_stats))
        r.register(_CapacityCollector(capacity_stats))

    def synthesized(self, took_s: float, audio_s: float) -> None:
        """One segment synthesized (the pipeline's :class:`~koe.pipeline.speaker.Observer`)."""
        self.synthesis.observe(took_s)
        self.segments.inc()
        if audio_s > 0:
            self.audio.inc(audio_s)
            self.rtf.observe(took_s / audio_s)

    def engine_call(self, size: int, seconds: float) -> None:
        """One shared engine call (the scheduler's :class:`~koe.scheduler.batch.CallObserver`)."""
        self.batch_size.observe(size)
        self.engine_calls.labels(str(size)).observe(seconds)

    def first_audio(self, transport: str, latency_s: float) -> None:
        self.time_to_first_audio.labels(transport).observe(latency_s)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
