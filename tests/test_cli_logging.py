"""``koe``'s logging flags, in a real process: JSON lines on request, keys in URLs redacted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from live_server import LOOPBACK, loopback_socket

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
                if not line.startswith("{"):
                    continue  # the CLI's own banner is for people, not a log line
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
