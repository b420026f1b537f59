from __future__ import annotations

from koe.agent.replay import tokenize
from koe_bench.languages import ANSWERS, answer, first_sentence_at, table
from koe_bench.turns import TurnTrace


def test_the_first_sentence_ends_at_the_japanese_full_stop() -> None:
    text = answer("ja", quick=False)
    trace = TurnTrace("koe", tokens=[0.1 * n for n in range(len(tokenize(text)))])
    at = first_sentence_at(text, trace)
    assert at is not None
    written = "".join(tokenize(text)[: round(at / 0.1) + 1])
    assert written.endswith("はい、行き方をご説明します。")


def test_quick_runs_speak_each_answer_s_first_sentence() -> None:
    assert answer("es", quick=True) == "Claro, así se llega."
    assert answer("ja", quick=True) == "はい、行き方をご説明します。"
    assert set(ANSWERS) == {"en-us", "ja", "es"}


def test_the_table_has_a_row_per_language() -> None:
    summary = {"median": 1.0, "p95": None, "max": 1.0, "min": 1.0, "mean": 1.0, "n": 1}
    strategies = {name: {"first_audio_s": summary, "gap_count": summary} for name in ("koe", "batch")}
    entry = {"voice": "jf_alpha", "strategies": strategies, "batch_over_koe_first_audio": 3.0,
             "audio_s_per_char": 0.2, "english_chars_per_char": 3.0}  # fmt: skip
    title, columns, rows, notes = table({"ja": entry})
    assert "Japanese" in title
    assert rows[0][0] == "ja" and len(rows[0]) == len(columns) and "ja 3.00" in notes[0]
