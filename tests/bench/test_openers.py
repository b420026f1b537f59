"""The openers scenario's turns and table; `koe bench --quick` runs it (tests/bench/test_quick_bench.py)."""

from __future__ import annotations

from koe.pipeline.precache import BUILTIN_OPENERS, first_segment
from koe_bench.openers import FOLLOW_UPS, OPENERS, answers, table


def test_opener_turns_repeat_each_opener_with_a_sentence_it_had_not_had() -> None:
    turns = answers(3 * len(OPENERS))
    for opener in OPENERS:
        mine = [t for t in turns if t.startswith(opener)]
        assert len(mine) == 3 and len(set(mine)) == 3
        assert all(t.removeprefix(opener + " ") in FOLLOW_UPS for t in mine)


def test_each_opener_is_a_whole_first_segment_so_the_cache_can_hit() -> None:
    for opener in OPENERS:
        assert opener in BUILTIN_OPENERS
        for answer in answers(5 * len(OPENERS)):
            if answer.startswith(opener):
                segment = first_segment(answer)
                assert segment is not None and segment.spoken_text == opener


def test_the_table_has_a_row_per_server_and_the_hits() -> None:
    summary = {"n": 4, "median": 0.05, "p95": None, "min": 0.04, "max": 0.06}
    scenario = {
        "openers": list(OPENERS),
        "kinds": {
            kind: {"first_audio_after_opener_s": summary, "first_audio_s": summary, "turns": 4}
            for kind in ("koe_cached", "koe_uncached")
        },
        "uncached_over_cached_first_audio": 12.0,
        "precache_s": 3.2,
        "cache": {"hits": 4, "misses": 4, "entries": 8, "bytes": 2**20},
    }
    _title, columns, rows, notes = table(scenario)
    assert all(len(row) == len(columns) for row in rows)
    assert [row[0] for row in rows] == ["koe_cached", "koe_uncached"]
    assert rows[0][2] == "0.060"  # the max stands in for a p95 of fewer than 20 turns
    assert "12×" in notes[0] and "4 hits" in notes[1]
