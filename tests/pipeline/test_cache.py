"""The segment cache on its own: byte-for-byte replay, the byte bound, LRU eviction, threads, and its key."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from koe.engine.timing import WordTiming
from koe.pipeline.cache import ENTRY_OVERHEAD_BYTES, MAX_ENTRY_SHARE, CacheKey, SegmentCache, segment_key
from koe.pipeline.precache import first_segment
from support.fake import fake_speech

SECOND = 24_000


def _key(text: str) -> CacheKey:
    return CacheKey("identity", "style", 1.0, "en-us", text)


def _audio(seed: int, samples: int = SECOND) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(samples).astype(np.float32)


def _capacity_for(entries: int, samples: int = SECOND) -> int:
    return entries * (samples * 4 + ENTRY_OVERHEAD_BYTES)


def test_a_hit_gives_back_the_stored_audio_and_timings_byte_for_byte() -> None:
    cache = SegmentCache(2**24)
    audio = _audio(1)
    timings = (WordTiming(0, 4, 0.1, 0.4), WordTiming(5, 9, 0.45, 0.8))
    assert cache.put(_key("Sure, I can."), audio, timings)
    hit = cache.get(_key("Sure, I can."))
    assert hit is not None
    assert hit.audio.tobytes() == audio.tobytes() and hit.timings == timings


def test_the_cache_keeps_its_own_copy_that_nobody_can_write() -> None:
    cache = SegmentCache(2**24)
    audio = _audio(2)
    original = audio.copy()
    cache.put(_key("a"), audio, ())
    audio[:] = 0  # the synthesizing caller reuses its buffer
    hit = cache.get(_key("a"))
    assert hit is not None and np.array_equal(hit.audio, original)
    with pytest.raises(ValueError, match="read-only"):
        hit.audio[0] = 1.0


def test_memory_stays_within_the_bound_under_many_distinct_segments() -> None:
    cache = SegmentCache(_capacity_for(10))
    for n in range(500):
        cache.put(_key(f"segment {n}"), _audio(n), (WordTiming(0, 7, 0.0, 0.5),))
        assert cache.stats.bytes <= cache.capacity_bytes
    stats = cache.stats
    assert 8 <= stats.entries <= 10
    assert stats.stores == 500 and stats.evictions == 500 - stats.entries
    assert _key("segment 499") in cache and _key("segment 0") not in cache


def test_the_least_recently_used_segment_is_evicted_first() -> None:
    names = "abcdefgh"[:MAX_ENTRY_SHARE]
    cache = SegmentCache(_capacity_for(len(names)))
    for name in names:
        assert cache.put(_key(name), _audio(ord(name)), ())
    assert cache.get(_key("a")) is not None  # a is now the most recently used
    cache.put(_key("z"), _audio(0), ())
    assert [name for name in names + "z" if _key(name) not in cache] == ["b"]
    assert cache.stats.evictions == 1


def test_one_segment_larger_than_its_share_is_not_kept() -> None:
    cache = SegmentCache(_capacity_for(MAX_ENTRY_SHARE))
    assert not cache.put(_key("a long answer"), _audio(1, 2 * SECOND), ())
    assert cache.put(_key("an opener"), _audio(2), ())
    assert cache.stats.entries == 1


def test_storing_a_key_again_keeps_the_first_entry_and_counts_one_store() -> None:
    cache = SegmentCache(2**24)
    first = _audio(1)
    cache.put(_key("a"), first, ())
    cache.put(_key("a"), first.copy(), ())
    assert cache.stats.stores == 1 and cache.stats.entries == 1
    assert cache.stats.bytes == first.nbytes + ENTRY_OVERHEAD_BYTES


def test_lookups_count_hits_and_misses() -> None:
    cache = SegmentCache(2**24)
    assert cache.get(_key("a")) is None
    cache.put(_key("a"), _audio(1), ())
    assert cache.get(_key("a")) is not None
    assert _key("b") not in cache  # a membership test is neither
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)


def test_a_disabled_cache_holds_and_counts_nothing() -> None:
    cache = SegmentCache(0)
    assert not cache.enabled
    assert not cache.put(_key("a"), _audio(1), ())
    assert cache.get(_key("a")) is None
    assert cache.stats.misses == 0 and cache.stats.entries == 0


def test_empty_audio_is_not_kept() -> None:
    cache = SegmentCache(2**24)
    assert not cache.put(_key("..."), np.zeros(0, dtype=np.float32), ())


def test_threads_storing_and_reading_at_once_never_mix_up_entries() -> None:
    cache = SegmentCache(_capacity_for(20, 2_400))
    names = [f"segment {n}" for n in range(60)]
    wrong: list[str] = []

    def worker(seed: int) -> None:
        order = np.random.default_rng(seed).permutation(len(names))
        for index in np.tile(order, 5):
            name = names[index]
            hit = cache.get(_key(name))
            if hit is None:
                cache.put(_key(name), _audio(int(index), 2_400), (WordTiming(0, int(index), 0.0, 0.1),))
            elif not np.array_equal(hit.audio, _audio(int(index), 2_400)) or hit.timings[0].text_end != index:
                wrong.append(name)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = cache.stats
    assert not wrong
    assert stats.hits + stats.misses == 8 * 5 * len(names)
    assert stats.bytes == stats.entries * (2_400 * 4 + ENTRY_OVERHEAD_BYTES + 128) <= cache.capacity_bytes


def test_the_key_follows_the_voice_the_blend_weights_the_speed_the_accent_and_what_was_loaded() -> None:
    speech = fake_speech()
    text = "Sure, I can help with that."
    base = segment_key(speech.identity, speech.voice("af_heart"), text)
    assert segment_key(speech.identity, speech.voice("af_heart"), text) == base
    different = [
        segment_key(speech.identity, speech.voice("af_bella"), text),
        segment_key(speech.identity, speech.voice("af_heart(2)+af_sky(1)"), text),
        segment_key(speech.identity, speech.voice("af_heart(1)+af_sky(1)"), text),
        segment_key(speech.identity, speech.voice("af_heart", speed=1.1), text),
        segment_key(speech.identity, speech.voice("af_heart", lang="en-gb"), text),
        segment_key("another model", speech.voice("af_heart"), text),
        segment_key(speech.identity, speech.voice("af_heart"), "Sure, I can help with this."),
    ]
    assert len({base, *different}) == len(different) + 1
    # the same weights written twice over are the same table, so the same voice to the cache
    same_blend = segment_key(speech.identity, speech.voice("af_heart(4)+af_sky(2)"), text)
    assert same_blend == different[1]


@pytest.mark.parametrize(
    "written",
    [
        "Sure, I can help with that. Here is how.",
        "Sure,   I can help  with that.\n\nHere is how.",
        "  **Sure**, I can help with *that*. Here is how.",
        "Sure, I can help with that.",
    ],
)
def test_spacing_and_markdown_do_not_change_a_first_clause_s_key(written: str) -> None:
    segment = first_segment(written)
    assert segment is not None and segment.spoken_text == "Sure, I can help with that."
