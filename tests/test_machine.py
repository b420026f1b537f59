"""What is measured on a machine is kept under its key, and nothing else is ever read back as it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from koe import machine
from koe.machine import Measured, cpu_identity


def test_a_kept_measurement_reads_back_under_the_same_key_only(tmp_path: Path) -> None:
    Measured(tmp_path, {"what": "costs", "threads": 2}).write({"seconds": 0.25})
    assert Measured(tmp_path, {"what": "costs", "threads": 2}).read() == {"seconds": 0.25}
    assert Measured(tmp_path, {"what": "costs", "threads": 1}).read() is None


def test_a_measurement_of_another_cpu_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Measured(tmp_path, {"what": "costs"}).write({"seconds": 0.25})
    monkeypatch.setattr(machine, "cpu_identity", lambda: "another machine's CPU")
    assert Measured(tmp_path, {"what": "costs"}).read() is None


@pytest.mark.parametrize(
    "damage",
    ["not json", json.dumps([1, 2]), json.dumps({"schema": "koe-measured/1", "key": {}, "values": {}})],
    ids=["unreadable", "not a record", "another key"],
)
def test_a_damaged_record_reads_as_nothing_and_is_replaced(tmp_path: Path, damage: str) -> None:
    measured = Measured(tmp_path, {"what": "costs"})
    measured.path.parent.mkdir(parents=True, exist_ok=True)
    measured.path.write_text(damage)
    assert measured.read() is None
    measured.write({"seconds": 0.5})
    assert measured.read() == {"seconds": 0.5}


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_record(tmp_path: Path) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    measured = Measured(blocked / "measured", {"what": "costs"})
    measured.write({"seconds": 0.5})  # logged, not raised
    assert measured.read() is None


def test_a_cpu_is_named_by_its_instruction_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(machine, "_CPUINFO", cpuinfo)

    def named(flags: str) -> str:
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n")
        return cpu_identity()

    assert named("sse2 avx2 fma") == named("fma sse2 avx2")
    assert named("sse2 avx2 fma") != named("sse2 avx2 fma avx512f avx512_vnni")


def test_two_processes_write_a_kept_file_under_names_of_their_own(tmp_path: Path) -> None:
    """Two servers (or test workers) sharing a cache must not rename one partial file from under each
    other: the partial name is this process's, beside the file, with its suffix (np.savez needs it)."""
    script = (
        "import sys; from pathlib import Path; from koe.machine import partial_of; "
        "print(partial_of(Path(sys.argv[1])))"
    )
    kept = tmp_path / "calibration" / "af_heart.npz"
    names = {
        subprocess.run(
            [sys.executable, "-c", script, str(kept)], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(names) == 2
    assert all(Path(name.strip()).parent == kept.parent and name.strip().endswith(".npz") for name in names)
