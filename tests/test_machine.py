"""What is measured on a machine is kept under its key, and nothing else is ever read back as it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from koe import machine
from koe.machine import Measured, cpu_identity, partial_of, prune_to_used_last, usable_cores


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


#: The CPUs the quota tests pretend this process may run on.
_AFFINITY = 4


def _fake_root(tmp_path: Path, cgroups: str, files: dict[str, str]) -> Path:
    """A root with ``/proc/self/cgroup`` reading ``cgroups`` and ``files`` (paths below the root)."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroups)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("cgroups", "files", "cores"),
    [
        ("0::/koe.slice\n", {"sys/fs/cgroup/koe.slice/cpu.max": "150000 100000\n"}, 2),
        ("0::/koe.slice\n", {"sys/fs/cgroup/koe.slice/cpu.max": "50000 100000\n"}, 1),
        ("0::/koe.slice\n", {"sys/fs/cgroup/koe.slice/cpu.max": "800000 100000\n"}, _AFFINITY),
        ("0::/koe.slice\n", {"sys/fs/cgroup/koe.slice/cpu.max": "max 100000\n"}, _AFFINITY),
        (
            "0::/koe.slice/koe.service\n",
            {
                "sys/fs/cgroup/koe.slice/cpu.max": "200000 100000\n",
                "sys/fs/cgroup/koe.slice/koe.service/cpu.max": "max 100000\n",
            },
            2,
        ),
        ("0::/\n", {"sys/fs/cgroup/cpu.max": "300000 100000\n"}, 3),
        (
            "1:cpu,cpuacct:/docker/0123abcd\n",
            {
                "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "100000\n",
                "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
            },
            1,
        ),
        (
            "1:cpu,cpuacct:/\n",
            {"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"},
            _AFFINITY,
        ),
        ("0::/koe.slice\n", {}, _AFFINITY),
    ],
    ids=[
        "v2 quota of 1.5 cores, rounded up",
        "v2 quota of half a core, at least 1",
        "v2 quota above the CPUs",
        "v2 max: no quota",
        "v2 quota of the parent cgroup",
        "v2 container's own cgroup at the mount",
        "v1 container's quota at the mount, the path being the host's",
        "v1 -1: no quota",
        "no cgroup files",
    ],
)
def test_the_usable_cores_are_the_fewer_of_the_cpus_and_the_cgroup_quota(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cgroups: str, files: dict[str, str], cores: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(_AFFINITY)))
    assert usable_cores(_fake_root(tmp_path, cgroups, files)) == cores


def test_a_malformed_quota_is_logged_and_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(_AFFINITY)))
    root = _fake_root(tmp_path, "0::/koe.slice\n", {"sys/fs/cgroup/koe.slice/cpu.max": "lots 100000\n"})
    assert usable_cores(root) == _AFFINITY
    assert "expected a positive quota and period, got 'lots' and '100000'" in caplog.text


def test_a_root_without_proc_reads_the_mount_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(_AFFINITY)))
    (tmp_path / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "cpu.max").write_text("200000 100000\n")
    assert usable_cores(tmp_path) == 2


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_a_process_started_on_one_cpu_has_one_usable_core() -> None:
    script = "from koe.machine import usable_cores; print(usable_cores())"
    ran = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "1"


def test_pruning_keeps_the_files_used_last_and_leaves_writes_in_progress_alone(tmp_path: Path) -> None:
    for age, name in enumerate(["newest.onnx", "middle.onnx", "oldest.onnx", "other.npz"]):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    in_progress = partial_of(tmp_path / "writing.onnx")
    in_progress.write_bytes(b"x")
    os.utime(in_progress, (0, 0))  # older than every kept file: still not the pruner's
    prune_to_used_last(tmp_path, ".onnx", 2)
    left = sorted(path.name for path in tmp_path.iterdir())
    assert left == sorted(["newest.onnx", "middle.onnx", "other.npz", in_progress.name])
