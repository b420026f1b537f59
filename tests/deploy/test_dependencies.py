"""The gpu extra's requirements, read from pyproject.toml: what pip may and may not install."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def extra(name: str) -> list[Requirement]:
    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return [Requirement(line) for line in extras[name]]


@pytest.mark.parametrize(("version", "allowed"), [("2.9.1", False), ("2.10.0", True), ("2.13.0", True)])
def test_gpu_extra_refuses_torch_before_2_10(version: str, allowed: bool) -> None:
    """PYSEC-2026-2286 (RCE through ``torch.load(weights_only=True)``) is fixed in 2.10.0."""
    (torch,) = [r for r in extra("gpu") if r.name == "torch"]
    assert torch.specifier.contains(version) is allowed


def test_gpu_extra_does_not_pull_kokoro_and_its_phonemizer_fork() -> None:
    """kokoro declares misaki[en] → phonemizer-fork, which overwrites phonemizer: kokoro goes in --no-deps."""
    names = {r.name for r in extra("gpu")}
    assert not names & {"kokoro", "phonemizer-fork"}
    assert {"transformers", "loguru", "huggingface-hub", "attrs"} <= names  # what kokoro.model imports


# --- pip itself refuses an old torch ---------------------------------------------------------------------

LOCK = PYPROJECT.parent / "requirements.lock"
PROBE = "koe-gpu-extra-probe"


def _wheel(directory: Path, name: str, version: str, requires: list[str] = []) -> None:  # noqa: B006 (read only)
    """A metadata-only wheel: all pip's resolver reads, so it stands in for torch's gigabytes."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        f"{dist}/METADATA": "".join(
            [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
            + [f"Requires-Dist: {r}\n" for r in requires]
        ),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: koe-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*lines, f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def _resolve(index: Path, *pip_args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``pip install --dry-run`` of the probe from ``index`` only; returns pip's result and what it chose."""
    report = index / "report.json"
    # no pip.conf and no PIP_* variables: a machine's own wheel folders and constraints must not take part
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ["PIP_CONFIG_FILE"] = os.devnull
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
         "--find-links", str(index), "--report", str(report), *pip_args, PROBE],
        capture_output=True, text=True, check=False, timeout=120, env=environ,
    )  # fmt: skip
    chosen = {}
    if result.returncode == 0:
        installs = json.loads(report.read_text())["install"]
        chosen = {item["metadata"]["name"]: item["metadata"]["version"] for item in installs}
    return result, chosen


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """A package folder holding a probe that requires exactly the gpu extra's torch line, and torch 2.9.1."""
    torch_lines = [str(r) for r in extra("gpu") if r.name == "torch"]
    _wheel(tmp_path, PROBE, "1.0", torch_lines)
    _wheel(tmp_path, "torch", "2.9.1")
    return tmp_path


def test_pip_refuses_to_install_the_gpu_extra_with_torch_2_9(index: Path) -> None:
    result, _ = _resolve(index)
    assert result.returncode != 0
    # pip saw 2.9.1 (the only torch there) and refused it for the extra's bound
    assert "from versions: 2.9.1" in result.stderr, result.stdout + result.stderr


def test_pip_picks_torch_2_10_when_it_is_there(index: Path) -> None:
    _wheel(index, "torch", "2.10.0")
    result, chosen = _resolve(index)
    assert result.returncode == 0, result.stderr
    assert chosen["torch"] == "2.10.0"


def test_the_lock_files_torch_satisfies_the_extra_and_a_2_9_pin_cannot(index: Path, tmp_path: Path) -> None:
    """Installs use requirements.lock as constraints: its torch must resolve; an old pin there must fail."""
    (locked,) = [line for line in LOCK.read_text().splitlines() if line.startswith("torch==")]
    _wheel(index, "torch", locked.removeprefix("torch=="))
    for pin, allowed in ((locked, True), ("torch==2.9.1", False)):
        constraints = tmp_path / "constraints.txt"
        constraints.write_text(pin + "\n")
        result, chosen = _resolve(index, "--constraint", str(constraints))
        assert (result.returncode == 0) is allowed, result.stderr
        if allowed:
            assert chosen["torch"] == locked.removeprefix("torch==")
