"""The PyTorch engine on CUDA: the checks ``test_torch_real.py`` makes on the CPU, on the device the GPU
image serves from. Skipped where torch sees no CUDA device (this project's development machine);
``bench/gpu/run.sh`` runs them first on a GPU machine, before the capacity ladder. There no G2P is
installed: with ``KOE_GPU_KIT`` naming the kit, the texts' phonemes and voices come from it
(:mod:`koe_bench.gpukit`).

The bounds are the CPU tests' own: the stages against the int8 graph within
``koe.conversion.parity.TOLERANCES``, and a batch member the same take as itself alone. On CUDA the engine
pads its passes to buckets, warms them and replays the acoustic core from CUDA graphs (by default): a
member must sound the same through a graph as through the eager pass, and passes meet only bucket shapes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koe.engine.assets import packaged_model_bytes
from koe.engine.quality import compare
from koe.pipeline.speech import Speech
from koe_bench.gpukit import CUDA_BATCH_TEXTS, CUDA_STAGES_TEXT, kit_speech
from support.batching import SAME_TAKE_DB, assert_batch_members_sound_as_alone
from support.batching import request as sentence_request

pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")

import torch

from koe.conversion.install import install
from koe.conversion.parity import TOLERANCES, compare_stages, exceeded
from koe.conversion.taps import Taps
from koe.engine.torch import GRAPH_LIMIT, TorchEngine, TorchOptions

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
]

#: Different lengths, voices and speeds in one pass, as sessions put them there.
BATCH_TEXTS = CUDA_BATCH_TEXTS


@pytest.fixture(scope="module")
def cuda_speech(request: pytest.FixtureRequest) -> Speech:
    """The torch engine on the first CUDA device with the derived weights, behind the shared ``speech``'s
    voices and G2P, or the GPU kit's (``KOE_GPU_KIT``)."""
    engine = TorchEngine.load(install("derived"), TorchOptions(device="cuda", max_batch=len(BATCH_TEXTS)))
    kit = os.environ.get("KOE_GPU_KIT")
    if kit:
        return kit_speech(Path(kit), engine)
    shared: Speech = request.getfixturevalue("speech")
    return shared.with_engine(engine)


def test_the_engine_runs_on_cuda_and_says_so(cuda_speech: Speech) -> None:
    assert cuda_speech.engine.description.startswith("torch on cuda")
    assert cuda_speech.engine.description.endswith("; bucketed shapes; CUDA graphs on)")
    assert next(cuda_speech.engine._model.parameters()).is_cuda  # type: ignore[attr-defined]


def test_on_cuda_every_bucket_within_the_limit_was_warmed_and_the_small_ones_captured(
    cuda_speech: Speech,
) -> None:
    engine: TorchEngine = cuda_speech.engine  # type: ignore[assignment]
    assert engine.buckets is not None and engine.warm_s is not None
    texts, acoustics = engine.buckets.plan(engine.options.warm_limit)
    assert engine.warmed == [("text", *s) for s in texts] + [("acoustic", *s) for s in acoustics]
    assert engine.graph_shapes == sorted(s for s in acoustics if s[0] * s[1] <= GRAPH_LIMIT)


def test_on_cuda_a_graph_replay_sounds_as_the_eager_pass(cuda_speech: Speech) -> None:
    """One batch through the graphs, and through a twin on the same weights that runs every pass eagerly."""
    engine: TorchEngine = cuda_speech.engine  # type: ignore[assignment]
    options = TorchOptions(device="cuda", max_batch=engine.options.max_batch, warm=False, graphs=False)
    eager = engine.sharing(options)  # its shapes are warm already: the first engine ran them
    assert eager.description.endswith("; bucketed shapes; CUDA graphs off)")
    requests = [sentence_request(cuda_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    before = engine.pass_shapes()
    replayed, eagerly = engine.synthesize_batch(requests), eager.synthesize_batch(requests)
    (acoustic,) = [(r, w) for (kind, r, w), n in engine.pass_shapes().items()
                   if kind == "acoustic" and n > before.get((kind, r, w), 0)]  # fmt: skip
    assert acoustic in engine.graph_shapes  # the batch did replay a graph
    for graphed, plain in zip(replayed, eagerly, strict=True):
        assert graphed.timing is not None and plain.timing is not None
        assert (graphed.timing.durations == plain.timing.durations).all()
        difference = compare(graphed.audio, plain.audio)
        assert difference.distance_db < SAME_TAKE_DB and abs(difference.level_db) < SAME_TAKE_DB


def test_on_cuda_passes_meet_only_bucket_shapes(cuda_speech: Speech) -> None:
    engine: TorchEngine = cuda_speech.engine  # type: ignore[assignment]
    requests = [sentence_request(cuda_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    engine.synthesize_batch(requests[:2])
    assert engine.buckets is not None and engine.pass_shapes()
    for kind, rows, width in engine.pass_shapes():
        assert rows in engine.buckets.rows
        assert width in (engine.buckets.tokens if kind == "text" else engine.buckets.frames)


def test_on_cuda_the_stages_match_the_int8_graph(cuda_speech: Speech) -> None:
    one = sentence_request(cuda_speech, CUDA_STAGES_TEXT, "af_heart")
    errors = compare_stages(cuda_speech.engine._model, Taps(packaged_model_bytes(), threads=2), one)  # type: ignore[attr-defined]
    assert exceeded(errors) == [], errors


def test_on_cuda_a_segment_sounds_the_same_alone_and_in_a_batch(cuda_speech: Speech) -> None:
    requests = [sentence_request(cuda_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    assert_batch_members_sound_as_alone(cuda_speech.engine, requests)


@pytest.fixture(scope="module")
def half_engine(cuda_speech: Speech) -> TorchEngine:
    """The ladder's engine on the device (``KOE_TORCH_DTYPE=float16``): its own copy of the weights, cast,
    with buckets, warm-up and CUDA graphs as by default."""
    engine = TorchEngine.load(
        install("derived"), TorchOptions(device="cuda", max_batch=len(BATCH_TEXTS), dtype="float16")
    )
    assert next(engine._model.parameters()).dtype == torch.float16
    return engine


def test_on_cuda_float16_captures_its_graphs_and_says_so(half_engine: TorchEngine) -> None:
    assert half_engine.description.endswith(" weights in float16; bucketed shapes; CUDA graphs on)")
    assert half_engine.graph_shapes


def test_on_cuda_float16_stages_match_the_int8_graph(cuda_speech: Speech, half_engine: TorchEngine) -> None:
    one = sentence_request(cuda_speech, CUDA_STAGES_TEXT, "af_heart")
    errors = compare_stages(half_engine._model, Taps(packaged_model_bytes(), threads=2), one)
    assert exceeded(errors) == [], errors


def test_on_cuda_float16_speaks_within_the_audio_gate_of_float32(
    cuda_speech: Speech, half_engine: TorchEngine
) -> None:
    requests = [sentence_request(cuda_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    halves, fulls = half_engine.synthesize_batch(requests), cuda_speech.engine.synthesize_batch(requests)
    for half, full in zip(halves, fulls, strict=True):
        assert half.timing is not None and full.timing is not None
        assert (half.timing.durations == full.timing.durations).all()
        difference = compare(half.audio, full.audio)
        assert difference.distance_db < TOLERANCES.audio_distance_db, difference
        assert abs(difference.level_db) < TOLERANCES.audio_level_db, difference
