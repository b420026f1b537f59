"""The PyTorch backend on CPU with random weights built from Kokoro's config.json: KModel's architecture,
strict checkpoint loading, passes bounded by ``max_batch``, cancellation. That the audio is speech, and the
same alone or in a batch, is proven with the weights derived from the int8 model (``test_torch_real.py``).
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from koe.engine.base import Engine, SynthesisRequest
from koe.errors import AssetError, ConfigError, SynthesisError

torch = pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip(
    "kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4 (see docs/deploy.md)"
)

from koe.conversion.install import download_official  # noqa: E402
from koe.engine.kmodel.checkpoint import (  # noqa: E402 - only importable once torch and kokoro are present
    COMPONENTS,
    LOCAL,
    Weights,
    build_model,
    load_checkpoint,
    verify_file,
)
from koe.engine.torch import TorchEngine, TorchOptions, load_voice_tensors  # noqa: E402

_SAMPLES_PER_FRAME = 600
PHONEMES = ("həlˈoʊ", "ðɪs ɪz ɐ tˈɛst", "wˈʌn", "kˈæt")


@pytest.fixture(scope="module")
def model(random_kmodel: object) -> object:
    return random_kmodel


@pytest.fixture(scope="module")
def engine(model: object) -> TorchEngine:
    # one thread: the CI machine has two cores shared with other work, and torch oversubscribes them
    return TorchEngine(model, TorchOptions(device="cpu", max_batch=4, threads=1))


@pytest.fixture(scope="module")
def blank() -> object:
    """A second, untouched architecture for the checkpoint tests to load into."""
    return build_model()


@pytest.fixture
def decoder_batches(engine: TorchEngine) -> Iterator[list[int]]:
    """Batch size of every acoustic pass, recorded by a forward hook on the generator's last layer."""
    sizes: list[int] = []
    handle = engine._model.decoder.generator.conv_post.register_forward_hook(
        lambda _m, args, _out: sizes.append(args[0].shape[0])
    )
    yield sizes
    handle.remove()


def styles(count: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((510, 1, 256)).astype(np.float32) for _ in range(count)]


def upstream(model: object, request: SynthesisRequest) -> tuple[int, list[int]]:
    """Audio length and durations from KModel's own single-utterance forward, the reference."""
    from koe.engine.vocab import tokenize

    row = torch.from_numpy(request.style[len(tokenize(request.phonemes)) - 1])
    output = model(request.phonemes, row, request.speed, return_output=True)  # type: ignore[operator]
    return int(output.audio.shape[-1]), output.pred_dur.tolist()


def test_engine_satisfies_the_engine_protocol(engine: TorchEngine) -> None:
    typed: Engine = engine
    assert (typed.name, typed.sample_rate) == ("torch", 24_000)


@pytest.mark.slow
def test_batch_gives_the_lengths_and_durations_of_upstream_single_calls(
    model: object, engine: TorchEngine
) -> None:
    """N utterances in one batch (different lengths, styles, speeds) vs KModel's own batch-1 forward."""
    requests = [
        SynthesisRequest(p, s, speed)
        for p, s, speed in zip(PHONEMES, styles(len(PHONEMES)), (1.0, 1.3, 0.8, 1.1), strict=True)
    ]
    batched = engine.synthesize_batch(requests)
    reference = [upstream(model, r) for r in requests]
    assert [len(u.audio) for u in batched] == [length for length, _ in reference]
    assert [u.timing.durations.tolist() for u in batched if u.timing] == [d for _, d in reference]
    assert len({tuple(d) for _, d in reference}) == len(PHONEMES)  # durations differ: the test can fail
    assert all(u.audio.dtype == np.float32 and np.isfinite(u.audio).all() for u in batched)


@pytest.mark.slow
def test_utterances_of_different_lengths_share_one_acoustic_pass(
    engine: TorchEngine, decoder_batches: list[int]
) -> None:
    (style,) = styles(1)
    requests = [SynthesisRequest("həlˈoʊ", style), SynthesisRequest("ðɪs ɪz ɐ tˈɛst", style)]
    audio = engine.synthesize_batch(requests)
    assert decoder_batches == [2]
    assert len(audio[0].audio) != len(audio[1].audio)


@pytest.mark.slow
def test_passes_are_bounded_by_max_batch(engine: TorchEngine, decoder_batches: list[int]) -> None:
    (style,) = styles(1)
    audio = engine.synthesize_batch([SynthesisRequest("wˈʌn", style)] * 6)
    assert decoder_batches == [4, 2]
    assert len({len(u.audio) for u in audio}) == 1


@pytest.mark.slow
def test_cancelled_utterances_return_empty_and_skip_the_decoder(
    engine: TorchEngine, decoder_batches: list[int]
) -> None:
    requests = [SynthesisRequest(p, s) for p, s in zip(PHONEMES[:3], styles(3), strict=True)]
    polled: list[int] = []

    def cancelled(index: int) -> bool:
        polled.append(index)
        return index == 1

    audio = engine.synthesize_batch(requests, is_cancelled=cancelled)
    assert sorted(polled) == [0, 1, 2]
    assert len(audio[1].audio) == 0 and len(audio[0].audio) > 0 and len(audio[2].audio) > 0
    assert sum(decoder_batches) == 2


def test_empty_phonemes_give_empty_audio_without_a_pass(
    engine: TorchEngine, decoder_batches: list[int]
) -> None:
    (style,) = styles(1)
    requests = [SynthesisRequest("", style), SynthesisRequest("#@1", style)]  # no symbol in the vocabulary
    assert [len(u.audio) for u in engine.synthesize_batch(requests)] == [0, 0]
    assert decoder_batches == []


def test_phonemes_past_the_window_are_refused_not_truncated(engine: TorchEngine) -> None:
    (style,) = styles(1)
    with pytest.raises(SynthesisError, match="at most 510"):
        engine.synthesize(SynthesisRequest("a" * 511, style))


def test_checkpoint_round_trip_restores_the_model(model: object, blank: object, tmp_path: Path) -> None:
    """Saved as upstream does (``module.`` prefixes), loaded strictly with weights_only."""
    path = tmp_path / "kokoro.pth"
    torch.save(
        {
            name: {f"module.{k}": v for k, v in getattr(model, name).state_dict().items()}
            for name in COMPONENTS
        },
        path,
    )
    first = next(iter(model.decoder.state_dict()))  # type: ignore[attr-defined]
    assert not torch.equal(blank.decoder.state_dict()[first], model.decoder.state_dict()[first])  # type: ignore[attr-defined]
    loaded = load_checkpoint(blank, path)
    for name in COMPONENTS:
        for key, value in getattr(model, name).state_dict().items():
            assert torch.equal(getattr(loaded, name).state_dict()[key], value), (name, key)


def test_checkpoint_missing_a_component_is_refused(model: object, blank: object, tmp_path: Path) -> None:
    path = tmp_path / "partial.pth"
    torch.save({"bert_encoder": model.bert_encoder.state_dict()}, path)  # type: ignore[attr-defined]
    with pytest.raises(AssetError, match="must hold the components"):
        load_checkpoint(blank, path)


def test_checkpoint_with_wrong_shapes_is_refused(model: object, blank: object, tmp_path: Path) -> None:
    states = {name: getattr(model, name).state_dict() for name in COMPONENTS}
    states["bert_encoder"] = torch.nn.Linear(3, 5).state_dict()
    path = tmp_path / "wrong.pth"
    torch.save(states, path)
    with pytest.raises(AssetError, match="'bert_encoder' does not fit"):
        load_checkpoint(blank, path)


class _Payload:
    """Any class: unpickling it would run code, which ``weights_only=True`` must refuse."""


def test_checkpoint_with_pickled_objects_is_refused(blank: object, tmp_path: Path) -> None:
    path = tmp_path / "evil.pth"
    path.write_bytes(pickle.dumps({"bert": _Payload()}))
    with pytest.raises(AssetError, match="cannot load checkpoint"):
        load_checkpoint(blank, path)


def test_load_without_weights_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOE_CACHE_DIR", str(tmp_path))
    with pytest.raises(AssetError, match="koe install --engine torch"):
        TorchEngine.load()


def test_official_weights_with_a_wrong_hash_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "kokoro-v1_0.pth"
    target.write_bytes(b"not the checkpoint")
    with pytest.raises(AssetError, match="does not match the pinned"):
        download_official(target)


def test_verify_file_accepts_the_right_hash(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert verify_file(path, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == path


def test_voice_tensors_load_as_style_tables(tmp_path: Path) -> None:
    table = torch.randn(510, 1, 256)
    torch.save(table, tmp_path / "af_test.pt")
    loaded = load_voice_tensors(tmp_path)
    assert list(loaded) == ["af_test"]
    np.testing.assert_array_equal(loaded["af_test"], table.numpy())


def test_voice_tensors_of_the_wrong_shape_are_refused(tmp_path: Path) -> None:
    torch.save(torch.zeros(10, 256), tmp_path / "af_small.pt")
    with pytest.raises(AssetError, match="510"):
        load_voice_tensors(tmp_path)


def test_cuda_requested_without_a_device_is_a_config_error(model: object) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the refusal only applies without one")
    with pytest.raises(ConfigError, match="no CUDA device"):
        TorchEngine(model, TorchOptions(device="cuda"))


def test_cuda_is_refused_before_any_weights_are_read(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the refusal only applies without one")
    with pytest.raises(ConfigError, match=r"no CUDA device.*--device cpu"):
        TorchEngine.load(Weights(tmp_path / "never-read.pth", LOCAL), TorchOptions(device="cuda"))


def test_max_batch_below_one_is_a_config_error(model: object) -> None:
    with pytest.raises(ConfigError, match="max_batch"):
        TorchEngine(model, TorchOptions(device="cpu", max_batch=0))


def test_installed_torch_is_not_vulnerable() -> None:
    from packaging.version import Version

    assert Version(torch.__version__.split("+")[0]) >= Version("2.10")


@pytest.mark.slow
def test_speech_loads_the_torch_engine_from_a_model_dir(
    model: object, installed_voices: Path, tmp_path: Path
) -> None:
    """``KOE_ENGINE=torch`` with ``KOE_MODEL_DIR``: a .pth plus voices, the same G2P and voices as ONNX."""
    from koe.engine.registry import EngineOptions
    from koe.pipeline.speech import Speech, SpeechOptions

    states = {name: getattr(model, name).state_dict() for name in COMPONENTS}
    torch.save({name: {f"module.{k}": v for k, v in state.items()} for name, state in states.items()},
               tmp_path / "kokoro-v1_0.pth")  # fmt: skip
    (tmp_path / "voices").mkdir()
    shutil.copy(installed_voices / "af_heart.bin", tmp_path / "voices" / "af_heart.bin")
    options = SpeechOptions(
        engine=EngineOptions("torch", threads=1), model_dir=tmp_path, warmup=False, langs=("en-us",)
    )
    speech = Speech.load(options)
    assert isinstance(speech.engine, TorchEngine) and speech.engine.weights == LOCAL
    assert speech.voices.names() == ["af_heart"]
    assert speech.synthesize("Hi there.", voice="af_heart").size > 0


def test_unknown_engine_is_a_config_error() -> None:
    from koe.engine.registry import EngineOptions

    with pytest.raises(ConfigError, match="engine must be one of onnx, torch"):
        EngineOptions("tensorflow")


def test_an_onnx_file_that_is_not_a_graph_cannot_be_derived_from(blank: object) -> None:
    from koe.conversion.derive import derive_state

    with pytest.raises(AssetError, match="could not be parsed by onnx"):
        derive_state(b"not an onnx graph", blank.state_dict(), set())  # type: ignore[attr-defined]


def test_a_graph_without_kokoros_weights_names_what_is_missing(blank: object) -> None:
    import onnx
    from onnx import TensorProto, helper

    from koe.conversion.derive import derive_state

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "other",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    data = helper.make_model(graph).SerializeToString()
    onnx.checker.check_model(onnx.load_from_string(data))
    modules = {name for name, _ in blank.named_modules() if name}  # type: ignore[attr-defined]
    with pytest.raises(AssetError, match=r"holds no weights for \d+ model parameters \(bert\."):
        derive_state(data, blank.state_dict(), modules)  # type: ignore[attr-defined]


def test_a_derived_checkpoint_that_fails_its_digest_is_refused(model: object, tmp_path: Path) -> None:
    """Random weights saved where the derived ones belong: loaded strictly, then refused by the pin."""
    from koe.engine.kmodel.checkpoint import DEQUANTIZED, load_weights, save_checkpoint

    state = {f"{name}.{key}": value for name in COMPONENTS
             for key, value in getattr(model, name).state_dict().items()}  # fmt: skip
    path = save_checkpoint(state, tmp_path / "kokoro-v1_0-dequantized-int8.pth")
    with pytest.raises(AssetError, match=r"does not match the pinned .*koe install --engine torch"):
        load_weights(Weights(path, DEQUANTIZED))
