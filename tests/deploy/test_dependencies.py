"""The gpu extra's requirements, read from pyproject.toml: what pip may and may not install."""

from __future__ import annotations

import tomllib
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
