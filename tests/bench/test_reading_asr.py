"""The reading corpus heard by the ASR through a real server: a small sample here, the whole corpus in
``koe bench --only reading`` (docs/text.md has its pass rates)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from koe.cli import main
from koe_bench import corpus, reading
from live_server import LiveServer
from support import Transcriber

pytestmark = [pytest.mark.asr, pytest.mark.slow]

#: Texts misread before the normalizer knew them (docs/benchmarks/reading-before.json): a link read with
#: its address, an abbreviation spelled out, a unit as letters, money with a scale, a phone number, code.
SAMPLE = (
    "Read [the docs](https://docs.example.com/start) first.",
    "Bring snacks, e.g. fruit or nuts.",
    "The trail is 5 km long.",
    "The startup raised $2.5M in its first round.",
    "Our number is (555) 123-4567.",
    "Use `time.sleep()` to pause.",
)


def test_texts_once_misread_are_heard_as_a_listener_expects(
    koe_server: LiveServer, transcribe: Transcriber
) -> None:
    readings = [r for r in corpus.load() if r.text in SAMPLE]
    assert len(readings) == len(SAMPLE)
    result = asyncio.run(reading.measure(koe_server.http_url, readings, "af_heart", lambda: None, transcribe))
    misheard = [(r["text"], r["transcript"]) for r in result["results"] if not r["passed"]]
    assert not misheard


def test_koe_bench_only_reading_writes_its_own_report(koe_server: LiveServer, tmp_path: Path) -> None:
    argv = ["bench", "--only", "reading", "--quick", "--url", koe_server.http_url, "--out", str(tmp_path)]
    assert main(argv) == 0
    report = json.loads((tmp_path / "reading.json").read_text())
    assert report["schema"] == reading.SCHEMA and report["in_process"] is False
    heard = report["reading"]
    assert heard["overall"]["texts"] == 2 and all(r["transcript"] for r in heard["results"])
    assert "| overall |" in (tmp_path / "reading.md").read_text()
