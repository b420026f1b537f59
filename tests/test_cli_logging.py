"""``koe``'s logging flags, in a real process: JSON lines on request (banners and errors too), keys in URLs
redacted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from koe.machine import usable_cores
from koe.settings import layout_of
from live_server import LOOPBACK, loopback_socket
from support.fake_serve import fake_serve_process

SECRET = "s3cret-0123456789abcdef"
_START_S = 60.0


def _lines(process: subprocess.Popen[str]) -> Iterator[str]:
    assert process.stderr is not None
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            return
        yield line.rstrip("\n")


@pytest.mark.parametrize(
    ("flags", "environ"), [(["--log-json"], {}), ([], {"KOE_LOG_FORMAT": "json"})], ids=["flag", "env"]
)
def test_json_logs_are_one_object_per_line_with_keys_redacted(
    flags: list[str], environ: dict[str, str]
) -> None:
    """``koe agent`` (no model to load) against a TTS that is not there: a warning, then uvicorn's lines."""
    server, tts = loopback_socket(), loopback_socket()
    port, tts_port = server.getsockname()[1], tts.getsockname()[1]
    server.close()  # the port is free for koe again
    tts.close()  # nothing listens there any more: listing the TTS voices fails and is logged
    tts_url = f"http://{LOOPBACK}:{tts_port}"
    command = [sys.executable, "-m", "koe.cli", *flags, "--log-level", "INFO", "agent", "--llm", "none",
               "--tts-url", tts_url, "--host", LOOPBACK, "--port", str(port)]  # fmt: skip
    entries: list[dict[str, Any]] = []
    with subprocess.Popen(
        command, env={**os.environ, **environ}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as process:
        try:
            for line in _lines(process):
                entries.append(json.loads(line))
                if "Uvicorn running" in entries[-1]["message"]:
                    httpx.get(f"http://{LOOPBACK}:{port}/agent/ping?api_key={SECRET}")
                if entries[-1]["logger"] == "uvicorn.access":
                    break
        finally:
            process.terminate()
    assert entries[0]["level"] == "WARNING" and entries[0]["logger"] == "koe.agent.remote"
    assert "could not list the TTS voices" in entries[0]["message"]
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in entries)
    assert all("color_message" not in entry for entry in entries)
    banner = next(entry for entry in entries if entry["logger"] == "koe.cli")
    assert banner["message"].startswith(f"agent on http://{LOOPBACK}:{port}") and banner["llm"] == "none"
    access = entries[-1]["message"]
    assert "/agent/ping?api_key=[redacted]" in access and SECRET not in access


def test_an_unknown_log_format_is_refused_with_its_variable_named() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "koe.cli", "voices"],
        env={**os.environ, "KOE_LOG_FORMAT": "xml"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert "KOE_LOG_FORMAT: expected one of text, json, got 'xml'" in result.stderr


def test_serve_with_json_logs_writes_only_json_naming_the_page_the_llm_and_the_key(tmp_path: Path) -> None:
    """At the default level (WARNING) the banner still comes, as records; a request and SIGTERM's shutdown
    write nothing that is not JSON either."""
    log = tmp_path / "serve.log"
    llm_url = f"http://{LOOPBACK}:9/v1"  # never asked: no turn is started
    settings = {
        "KOE_LOG_FORMAT": "json",
        "KOE_API_KEY": SECRET,
        "KOE_LLM": "openai",
        "KOE_LLM_BASE_URL": llm_url,
    }
    with fake_serve_process(log, settings=settings, log_level="WARNING") as (server, url):
        assert httpx.get(f"{url}/v1/models?api_key=wrong-{SECRET}").status_code == 401
        server.terminate()
        assert server.wait(timeout=_START_S) == -signal.SIGTERM  # uvicorn re-raises it once drained
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    banner = {key: value for entry in entries if entry["logger"] == "koe.cli" for key, value in entry.items()}
    assert banner["url"] == url and banner["page"] == f"{url}/"
    assert banner["llm"] == f"openai-compatible: gpt-4o-mini at {llm_url}"
    assert banner["api_key_required"] is True
    sized = layout_of(None, None, usable_cores())  # the server inherits this process's CPUs and cgroup
    assert (banner["workers"], banner["threads_per_worker"]) == (sized.workers, sized.threads)
    assert banner["usable_cores"] == sized.cores
    assert SECRET not in log.read_text(encoding="utf-8")


def test_an_error_with_json_logs_is_one_json_record_with_its_code() -> None:
    """A bad ``KOE_LLM`` stops ``koe serve`` before any model loads."""
    result = subprocess.run(
        [sys.executable, "-m", "koe.cli", "--log-format", "json", "serve", "--port", "0"],
        env={**os.environ, "KOE_LLM": "clippy"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    [entry] = [json.loads(line) for line in result.stderr.splitlines()]
    assert entry["level"] == "ERROR" and entry["code"] == "invalid_field"
    assert entry["message"] == (
        "error (invalid_field): KOE_LLM: expected one of auto, openai, bedrock, local, none, got 'clippy' "
        "(setting llm)"
    )
