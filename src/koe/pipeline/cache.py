"""The segment cache: the audio and word timings of segments said before, replayed bit for bit.

Kokoro is deterministic — the same phonemes, style table and speed give the same samples — and G2P gives the
same phonemes for the same text and accent. So a whole-decoded segment's audio is decided by the text G2P
reads (the segment's normalized ``spoken_text``: markdown, spacing and symbols are already folded there), the
voice's style table (a blend's weights included, by its digest), the speed, the accent, and what was loaded
(:attr:`koe.pipeline.speech.Speech.identity`: the engine, its weights and options, the G2P's version).
Keying on the spoken text rather than on the phonemes lets a hit skip G2P *and* the scheduler's queue: a
turn's stream hands a hit to its listener at once (:mod:`koe.pipeline.stream`).

One cache per server, shared by all its sessions; bounded in bytes (``Settings.segment_cache_mb``), the
least recently used entries evicted first; thread-safe. A segment is stored the first time it is decoded to
its end, whole or in windows (:mod:`koe.pipeline.stream`): the audio its listener heard, so a replay is
what was heard before; a cancelled or failed segment is never stored.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from koe.engine.timing import WordTiming
from koe.pipeline.voice import Voice
from koe.types import Audio

#: What an entry costs besides its samples: the key's text, the objects, the dictionary slot (an estimate).
ENTRY_OVERHEAD_BYTES = 512
#: What each timed word costs (a small frozen object of four numbers).
WORD_BYTES = 128
#: No single entry may take more than this share of the cache: one long answer must not flush the openers.
MAX_ENTRY_SHARE = 8
MIB = 2**20


@dataclass(frozen=True, slots=True)
class CacheKey:
    """Everything that decides a segment's audio but a windowed decode's window sizes (which follow its
    listener's buffer): one key holds the first decode of the segment, whole or windowed, as it was heard."""

    identity: str  # the loaded engine and G2P (Speech.identity)
    style: str  # the voice's style-table digest (Voice.style_digest)
    speed: float
    lang: str
    text: str  # the segment's spoken text, exactly as G2P reads it
    lexicon: str = ""  # the caller's lexicon's digest ("": none)


def segment_key(identity: str, voice: Voice, spoken_text: str) -> CacheKey:
    lexicon = voice.lexicon.digest if voice.lexicon is not None else ""
    return CacheKey(identity, voice.style_digest, voice.speed, voice.lang, spoken_text, lexicon)


@dataclass(frozen=True, slots=True)
class CachedSegment:
    """A segment's samples (read-only) and its word timings (text spans in its spoken text, seconds from its
    first sample), as the engine produced them."""

    audio: Audio
    timings: tuple[WordTiming, ...]

    @property
    def nbytes(self) -> int:
        return self.audio.nbytes + ENTRY_OVERHEAD_BYTES + WORD_BYTES * len(self.timings)


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters since start; ``entries`` and ``bytes`` are the current size."""

    capacity_bytes: int
    entries: int
    bytes: int
    hits: int
    misses: int
    stores: int
    evictions: int


class SegmentCache:
    """Least-recently-used segments within ``capacity_bytes`` (0 disables the cache). Thread-safe."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError(f"expected a capacity >= 0 bytes, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[CacheKey, CachedSegment] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._stores = self._evictions = 0
        self._lock = threading.Lock()

    @classmethod
    def of_megabytes(cls, megabytes: float) -> SegmentCache:
        return cls(int(megabytes * MIB))

    @property
    def enabled(self) -> bool:
        return self.capacity_bytes > 0

    def get(self, key: CacheKey) -> CachedSegment | None:
        """The segment, now the most recently used, or ``None`` (counted as a hit or a miss)."""
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry

    def __contains__(self, key: CacheKey) -> bool:
        """Whether ``key`` is held (neither counted nor refreshed)."""
        with self._lock:
            return key in self._entries

    def put(self, key: CacheKey, audio: Audio, timings: Sequence[WordTiming]) -> bool:
        """Keep a private, read-only copy of a segment's audio and timings; evicts the least recently used
        entries to make room. Returns whether it is held: empty audio, and an entry above
        ``1 / MAX_ENTRY_SHARE`` of the capacity, are not. A key already held is only refreshed (its audio is
        the same, bit for bit)."""
        if not self.enabled or not audio.size:
            return False
        entry = CachedSegment(np.array(audio, dtype=np.float32, copy=True), tuple(timings))
        entry.audio.setflags(write=False)
        if entry.nbytes > self.capacity_bytes // MAX_ENTRY_SHARE:
            return False
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return True
            self._entries[key] = entry
            self._bytes += entry.nbytes
            self._stores += 1
            while self._bytes > self.capacity_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes
                self._evictions += 1
            return True

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                capacity_bytes=self.capacity_bytes,
                entries=len(self._entries),
                bytes=self._bytes,
                hits=self._hits,
                misses=self._misses,
                stores=self._stores,
                evictions=self._evictions,
            )
