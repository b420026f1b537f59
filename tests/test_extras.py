"""Install hints: every extra a message asks for exists, and the command the message names runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import get_args

import pytest

from koe.extras import BENCH_INSTALL_HINT, Extra, install_hint

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = sorted(get_args(Extra))
#: What a hand-written hint for the package index looks like (``pip install 'koe[gpu]'``).
_INDEX_HINT = re.compile(r"koe\[[a-z-]+\]")

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _defined_extras() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return set(tomllib.load(file)["project"]["optional-dependencies"])


def test_every_extra_a_hint_can_name_is_defined_in_pyproject() -> None:
    assert set(EXTRAS) <= _defined_extras()


@pytest.mark.parametrize("root", ["src", "docs", "README.md"])
def test_no_message_or_page_asks_for_koe_from_a_package_index(root: str) -> None:
    """Hints are built by install_hint only; the benchmark corpora quote `pip install` as text to read."""
    paths = [ROOT / root] if root.endswith(".md") else sorted((ROOT / root).rglob("*"))
    found = [
        f"{path.relative_to(ROOT)}: {match}"
        for path in paths
        if path.suffix in {".py", ".md", ".js", ".html"}
        for match in _INDEX_HINT.findall(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@needs_make
@pytest.mark.parametrize("extra", EXTRAS)
def test_the_hinted_make_command_installs_that_extra_with_the_lock(extra: Extra) -> None:
    """``make -n`` prints what the hint's command would run, without installing anything."""
    command = ["make", "extra", f"EXTRA={extra}"]
    assert install_hint(extra).startswith(" ".join(command) + " ")
    result = subprocess.run(
        [*command, "-n"], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert f"install -c requirements.lock -e '.[{extra}]'" in result.stdout


@needs_make
def test_the_hinted_make_command_installs_the_benchmark_package_with_the_lock() -> None:
    command = ["make", "bench-install"]
    assert BENCH_INSTALL_HINT.startswith(" ".join(command) + " ")
    result = subprocess.run(
        [*command, "-n"], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "install -c requirements.lock -e ./bench" in result.stdout


@needs_make
def test_make_extra_refuses_a_name_pyproject_does_not_define() -> None:
    """``-o``: the venv's stamp counts as up to date, so only the name check runs."""
    result = subprocess.run(
        ["make", "-o", ".venv/.stamp-serve", "extra", "EXTRA=nonsense"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
    assert "NAME is one of" in result.stderr and 'got "nonsense"' in result.stderr
    assert "pip" not in result.stdout
