from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from koe.engine.assets import (
    MODEL_SHA256,
    MODEL_SIZE,
    local_source,
    packaged_model_bytes,
    pinned_voice_hashes,
    verify,
)
from koe.engine.voices import ENGLISH_VOICES, VOICES, VoiceBank
from koe.errors import AssetError, VoiceError


def test_pinned_hashes_cover_every_voice_of_the_package() -> None:
    hashes = pinned_voice_hashes()
    assert len(hashes) == 54
    assert set(VOICES) == set(hashes) and set(ENGLISH_VOICES) < set(hashes)


#: The project's measured hashes in its facts folder (shared/, beside the checkout or a folder above), if any.
SHARED_HASHES = next(
    (
        found
        for folder in Path(__file__).resolve().parents[3:6]
        if (found := folder / "shared" / "kokoro-js-1.2.1-voices.sha256").is_file()
    ),
    Path("shared/absent"),
)


@pytest.mark.skipif(not SHARED_HASHES.is_file(), reason="no shared/ folder beside this checkout")
def test_koes_copy_of_the_voice_hashes_is_the_measured_one() -> None:
    shared = dict(reversed(line.split()) for line in SHARED_HASHES.read_text().splitlines())
    assert {f"{name}.bin": digest for name, digest in pinned_voice_hashes().items()} == shared


def test_packaged_model_is_the_pinned_int8_export() -> None:
    model = packaged_model_bytes()
    assert len(model) == MODEL_SIZE


def test_hash_mismatch_names_both_hashes_and_the_repair() -> None:
    with pytest.raises(AssetError) as caught:
        verify(b"not the model", MODEL_SHA256, "int8 model")
    assert MODEL_SHA256 in caught.value.message
    assert "koe install --force" in caught.value.message


def _corrupt_copy(installed_voices: Path, directory: Path, name: str) -> None:
    data = bytearray((installed_voices / f"{name}.bin").read_bytes())
    data[1000] ^= 0xFF
    (directory / f"{name}.bin").write_bytes(bytes(data))


def test_corrupted_voice_file_is_refused(installed_voices: Path, tmp_path: Path) -> None:
    _corrupt_copy(installed_voices, tmp_path, "af_heart")
    with pytest.raises(AssetError, match=r"voice af_heart .*sha256"):
        VoiceBank.load(tmp_path, ("af_heart",), required=("af_heart",))


def test_a_corrupted_optional_voice_is_left_out_and_the_others_served(
    installed_voices: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(installed_voices / "af_heart.bin", tmp_path / "af_heart.bin")
    _corrupt_copy(installed_voices, tmp_path, "af_sky")
    bank = VoiceBank.load(tmp_path, ("af_heart", "af_sky"), required=("af_heart",))
    assert bank.names() == ["af_heart"] and bank.unavailable == ("af_sky",)
    assert "voice af_sky is not served" in caplog.text and "sha256" in caplog.text
    with pytest.raises(VoiceError, match="af_sky is unavailable") as refused:
        bank.resolve("af_sky")
    assert str(tmp_path) not in refused.value.message  # clients never see a path
    with pytest.raises(AssetError, match="no voice could be loaded"):
        VoiceBank.load(tmp_path, ("af_sky",))


def test_missing_voice_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(AssetError, match="koe install"):
        VoiceBank.load(tmp_path, ("af_heart",))


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({}, "no .onnx model"),
        ({"model.onnx": b"x"}, "no voices"),
    ],
)
def test_local_model_dir_errors_are_actionable(
    tmp_path: Path, layout: dict[str, bytes], message: str
) -> None:
    for name, data in layout.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(AssetError, match=message):
        local_source(tmp_path)


def test_local_model_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(AssetError, match="not a directory"):
        local_source(tmp_path / "absent")


def test_local_model_dir_finds_model_and_voices_subfolder(installed_voices: Path, tmp_path: Path) -> None:
    (tmp_path / "kokoro.onnx").write_bytes(b"graph")
    (tmp_path / "voices").mkdir()
    shutil.copy(installed_voices / "am_adam.bin", tmp_path / "voices" / "am_adam.bin")
    source = local_source(tmp_path)
    assert source.model_path == tmp_path / "kokoro.onnx"
    assert source.model_bytes() == b"graph"
    assert VoiceBank.load(source.voices_dir).names() == ["am_adam"]
