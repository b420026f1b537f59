"""A peer server's process: started in its own home directory, where a relative interpreter path (the
default ``.venv-peers/bin/python``) still names the one beside the checkout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from koe_bench.peer_process import peer_process


def test_a_relative_interpreter_path_is_found_from_the_peer_s_own_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    (checkout / "venv").mkdir(parents=True)
    home.mkdir()
    (checkout / "venv" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(checkout)
    with peer_process([os.path.join("venv", "python"), "-c", "print('started')"], home) as peer:
        assert peer.process.wait(30) == 0
    assert (home / "server.log").read_text().strip() == "started"
