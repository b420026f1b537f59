"""A scenario run as a script prints its result and writes the same JSON where it is asked to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koe_bench.resultfile import emit

REPORT = {"kinds": {"koe_say": {"wall_s": 1.5}}, "sentence": "Hello there."}


def test_the_result_is_printed_and_written_with_a_final_newline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "out.json"
    emit(REPORT, path)
    printed = capsys.readouterr().out
    assert path.read_text() == printed
    assert printed.endswith("}\n") and json.loads(printed) == REPORT
    assert printed == json.dumps(REPORT, indent=2) + "\n"


def test_without_a_path_the_result_is_only_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emit(REPORT, None)
    assert json.loads(capsys.readouterr().out) == REPORT
    assert list(tmp_path.iterdir()) == []
