"""The torch engine with bucketed shapes, on CPU: its passes meet only bucket shapes, warming runs every
bucket within its limit, and padding a pass wider or to more rows leaves every member as it sounds alone —
either side of the smallest boundaries real utterances reach, with an idle row, in a bucket eight times
wider than the utterance. Which bucket a width takes at every boundary is ``test_buckets.py``'s.

The shapes are recorded by forward hooks on modules each pass calls once (ALBERT for the text pass, the
decoder's ASR residual convolution for the acoustic pass), not taken from the engine's own count. Random
weights where only shapes matter; the weights derived from the int8 model where the audio is compared, with
the batch-versus-alone tolerance of ``support.batching``. The CUDA graphs are checked on a GPU
(``test_torch_cuda.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from koe.engine.base import SynthesisRequest
from koe.engine.quality import compare
from koe.errors import ConfigError
from koe.pipeline.speech import Speech
from support.batching import SAME_TAKE_DB, assert_batch_members_sound_as_alone, request

torch = pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")

from koe.engine.kmodel.buckets import Buckets, fit  # noqa: E402 - only importable once torch is present
from koe.engine.kmodel.forward import TextSide, acoustic_pass, text_pass  # noqa: E402
from koe.engine.torch import TorchEngine, TorchOptions  # noqa: E402
from koe.engine.vocab import count_tokens, tokenize  # noqa: E402

Shapes = dict[str, list[tuple[int, int]]]
#: A sentence whose phonemes are cut to exact token counts (the widths are what matter, not the words).
LONG_TEXT = "The next train leaves in four minutes from platform two, and the one after that at noon."


@pytest.fixture
def seen(random_kmodel: object) -> Iterator[Shapes]:
    """The (rows, width) of every text and acoustic pass ``random_kmodel`` runs while the test does."""
    shapes: Shapes = {"text": [], "acoustic": []}
    hooks = [
        random_kmodel.bert.register_forward_hook(  # type: ignore[attr-defined]
            lambda _m, args, _out: shapes["text"].append(tuple(args[0].shape))
        ),
        random_kmodel.decoder.asr_res.register_forward_hook(  # type: ignore[attr-defined]
            lambda _m, args, _out: shapes["acoustic"].append((args[0].shape[0], args[0].shape[-1]))
        ),
    ]
    yield shapes
    for hook in hooks:
        hook.remove()


def _styles(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal((510, 1, 256)).astype(np.float32) for _ in range(count)]


def test_on_the_cpu_buckets_warming_and_graphs_are_off_unless_asked(random_kmodel: object) -> None:
    engine = TorchEngine(random_kmodel, TorchOptions(device="cpu", threads=1))
    assert engine.buckets is None and engine.warmed == [] and engine.graph_shapes == []
    bucketed = TorchEngine(random_kmodel, TorchOptions(device="cpu", threads=1, buckets=True))
    assert bucketed.description == "torch on cpu (local checkpoint weights; bucketed shapes)"
    assert bucketed.warmed == [] and bucketed.buckets is not None


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (TorchOptions(device="cpu", buckets=True, warm=True, graphs=True), "CUDA graphs need a CUDA device"),
        (TorchOptions(device="cpu", buckets=False, warm=True), "need buckets"),
        (TorchOptions(device="cpu", buckets=True, warm_limit=0), "warm_limit must be at least 1"),
    ],
)
def test_switches_that_cannot_work_are_config_errors(
    random_kmodel: object, options: TorchOptions, error: str
) -> None:
    with pytest.raises(ConfigError, match=error):
        TorchEngine(random_kmodel, replace(options, threads=1))


@pytest.mark.slow
def test_passes_meet_only_bucket_shapes_and_the_engine_counts_them(
    random_kmodel: object, seen: Shapes
) -> None:
    engine = TorchEngine(random_kmodel, TorchOptions(device="cpu", max_batch=4, threads=1, buckets=True))
    buckets = engine.buckets
    assert buckets is not None
    phonemes = ("wˈʌn", "həlˈoʊ", "ðɪs ɪz ɐ tˈɛst", "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst ʌv ðə bˈʌkɪts", "kˈæt")
    engine.synthesize_batch([SynthesisRequest(p, s) for p, s in zip(phonemes, _styles(5), strict=True)])
    engine.synthesize(SynthesisRequest("ɐ", _styles(1)[0]))
    assert seen["text"] and seen["acoustic"]
    assert {rows for rows, _ in seen["text"] + seen["acoustic"]} <= set(buckets.rows)
    assert {width for _, width in seen["text"]} <= set(buckets.tokens)
    assert {width for _, width in seen["acoustic"]} <= set(buckets.frames)
    counted = engine.pass_shapes()
    for kind in ("text", "acoustic"):
        assert sorted(seen[kind]) == sorted(
            (rows, width) for (k, rows, width), n in counted.items() if k == kind for _ in range(n)
        )


@pytest.mark.slow
def test_without_buckets_the_passes_have_their_own_shapes(random_kmodel: object, seen: Shapes) -> None:
    """Control for the test above: the same requests meet widths off the ladders."""
    engine = TorchEngine(random_kmodel, TorchOptions(device="cpu", max_batch=4, threads=1))
    buckets = Buckets.for_model(50, 4)
    phonemes = ("wˈʌn", "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst")
    engine.synthesize_batch([SynthesisRequest(p, s) for p, s in zip(phonemes, _styles(2), strict=True)])
    assert seen["text"] == [(2, count_tokens(phonemes[1]) + 2)]
    assert seen["text"][0][1] not in buckets.tokens
    assert seen["acoustic"][0][1] not in buckets.frames


@pytest.mark.slow
def test_warming_runs_every_bucket_within_its_limit(random_kmodel: object, seen: Shapes) -> None:
    options = TorchOptions(device="cpu", max_batch=2, threads=1, buckets=True, warm=True, warm_limit=64)
    engine = TorchEngine(random_kmodel, options)
    assert engine.buckets is not None
    texts, acoustics = engine.buckets.plan(64)
    assert seen["text"] == [(1, engine.buckets.tokens[0]), *texts]  # first, the features warming uses
    assert seen["acoustic"] == acoustics
    assert engine.warmed == [("text", *s) for s in texts] + [("acoustic", *s) for s in acoustics]
    assert engine.warm_s is not None and engine.warm_s > 0
    assert engine.pass_shapes() == {}  # warming is not traffic


@pytest.fixture(scope="module")
def bucketed(torch_speech: Speech) -> TorchEngine:
    """The derived weights behind an engine that pads its passes to buckets (on CPU, where it is off by
    default)."""
    options = TorchOptions(device="cpu", max_batch=4, threads=2, buckets=True)
    return torch_speech.engine.sharing(options)  # type: ignore[attr-defined, no-any-return]


def _cut(speech: Speech, tokens: int, voice: str) -> SynthesisRequest:
    """A request of exactly ``tokens`` phoneme tokens, cut from :data:`LONG_TEXT`'s phonemes."""
    whole = request(speech, LONG_TEXT, voice)
    for end in range(len(whole.phonemes) + 1):
        if count_tokens(whole.phonemes[:end]) == tokens:
            return replace(whole, phonemes=whole.phonemes[:end])
    raise AssertionError(f"{LONG_TEXT!r} has fewer than {tokens} tokens")


@pytest.mark.slow
@pytest.mark.parametrize("boundary", [16, 32])
def test_rows_either_side_of_a_token_boundary_sound_as_alone(
    torch_speech: Speech, bucketed: TorchEngine, boundary: int
) -> None:
    """Widths ``boundary`` and ``boundary + 1`` (padding tokens included): alone, each in its own bucket;
    together, both in the next, with a short third member and an idle row (three rows pad to four)."""
    under, over = _cut(torch_speech, boundary - 2, "af_heart"), _cut(torch_speech, boundary - 1, "bf_emma")
    assert bucketed.buckets is not None
    assert fit(bucketed.buckets.tokens, boundary) == boundary < fit(bucketed.buckets.tokens, boundary + 1)
    before = bucketed.pass_shapes()
    assert_batch_members_sound_as_alone(bucketed, [under, over, request(torch_speech, "Hi.", "am_michael")])
    added = {key: n - before.get(key, 0) for key, n in bucketed.pass_shapes().items()}
    assert added.get(("text", 4, fit(bucketed.buckets.tokens, boundary + 1)), 0) == 1
    assert added.get(("text", 1, boundary), 0) >= 1


def _side(speech: Speech, text: str, voice: str) -> TextSide:
    one = request(speech, text, voice)
    ids = tokenize(one.phonemes)
    style = torch.from_numpy(one.style[len(ids) - 1, 0]).unsqueeze(0)
    with torch.inference_mode():
        (side,) = text_pass(speech.engine._model, [ids], style, torch.ones(1))  # type: ignore[attr-defined]
    return side


def _lasting(side: TextSide, frames: int) -> TextSide:
    """``side`` made ``frames`` long by its silences (the padding tokens' durations): the closing one
    stretched, or the opening one, then the closing one, cut down to a frame."""
    durations = side.durations.clone()
    change = frames - side.frames
    for end in (0, -1) if change < 0 else (-1,):
        step = max(change, 1 - int(durations[end]))
        durations[end] += step
        change -= step
    assert change == 0, f"{side.frames} frames cannot be cut to {frames}"
    return replace(side, durations=durations)


def _assert_sounds_as_alone(model: object, sides: list[TextSide], shape: tuple[int, int]) -> None:
    together = acoustic_pass(model, sides, shape)  # type: ignore[arg-type]
    for side, audio in zip(sides, together, strict=True):
        (alone,) = acoustic_pass(model, [side])  # type: ignore[arg-type]
        assert audio.shape == alone.shape == (side.frames * 600,)
        difference = compare(audio.numpy(), alone.numpy())
        assert difference.distance_db < SAME_TAKE_DB and abs(difference.level_db) < SAME_TAKE_DB, side.frames


@pytest.mark.slow
def test_rows_either_side_of_a_frame_boundary_sound_as_alone(
    torch_speech: Speech, bucketed: TorchEngine
) -> None:
    """At the second and third frame boundaries (the first is shorter than any utterance with its
    silences): a row exactly the bucket's width and one a frame wider, together in the next bucket."""
    assert bucketed.buckets is not None
    frames = bucketed.buckets.frames
    base = [_side(torch_speech, "Hi.", "am_michael"), _side(torch_speech, "Okay.", "bf_emma")]
    with torch.inference_mode():
        for boundary in frames[1:3]:
            sides = [_lasting(base[0], boundary), _lasting(base[1], boundary + 1)]
            shape = bucketed.buckets.acoustic_shape(len(sides), boundary + 1)
            assert shape == (2, frames[frames.index(boundary) + 1])
            _assert_sounds_as_alone(torch_speech.engine._model, sides, shape)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_short_utterance_padded_into_a_wide_bucket_sounds_as_alone(torch_speech: Speech) -> None:
    side = _lasting(_side(torch_speech, "Hi.", "af_heart"), 32)
    with torch.inference_mode():
        _assert_sounds_as_alone(torch_speech.engine._model, [side], (1, 8 * side.frames))  # type: ignore[attr-defined]
