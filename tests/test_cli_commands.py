"""Commands other distributions add: ``koe bench`` and ``koe soak`` come from the benchmark package's entry
points, say how to install it where it is missing, and ``koe --help`` loads nothing heavy for them."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

from koe.cli import COMMANDS_GROUP, build_parser, main
from koe.extras import BENCH_INSTALL_HINT


def test_bench_and_soak_are_the_benchmark_packages_commands() -> None:
    added = {entry.name for entry in importlib.metadata.entry_points(group=COMMANDS_GROUP)}
    assert added >= {"bench", "soak"}
    parser = build_parser()
    for argv in (["bench", "--quick"], ["soak", "--minutes", "1"]):
        assert parser.parse_args(argv).handler.__module__ == "koe_bench.commands"


@pytest.mark.parametrize("argv", [["bench", "--quick"], ["soak", "--help"], ["bench"]])
def test_without_the_benchmark_package_its_commands_say_how_to_install_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    assert "not installed" in build_parser().format_help()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "missing_extra" in err and "koe-bench" in err and BENCH_INSTALL_HINT in " ".join(err.split())


def test_koe_help_loads_only_the_benchmark_packages_registrars() -> None:
    probe = (
        "import json, sys\n"
        "from koe.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout)
    assert [name for name in loaded if name.startswith("koe_bench")] == ["koe_bench", "koe_bench.commands"]
    assert not {"numpy", "onnxruntime", "koe.pipeline", "koe.server"} & set(loaded)
