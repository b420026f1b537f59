"""The PyTorch engine on CUDA: the checks ``test_torch_real.py`` makes on the CPU, on the device the GPU
image serves from. Skipped where torch sees no CUDA device (this project's development machine);
``bench/gpu/run.sh`` runs them first on a GPU machine, before the capacity ladder. There no G2P is
installed: with ``KOE_GPU_KIT`` naming the kit, the texts' phonemes and voices come from it
(:mod:`koe_bench.gpukit`).

The bounds are the CPU tests' own: the stages against the int8 graph within
``koe.conversion.parity.TOLERANCES``, and a batch member the same take as itself alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koe.engine.assets import packaged_model_bytes
from koe.pipeline.speech import Speech
from koe_bench.gpukit import CUDA_BATCH_TEXTS, CUDA_STAGES_TEXT, kit_speech
from support.batching import assert_batch_members_sound_as_alone
from support.batching import request as sentence_request

pytest.importorskip("torch", reason="the gpu extra is not installed: pip install 'koe[gpu]'")
pytest.importorskip("kokoro.model", reason="kokoro is not installed: pip install --no-deps kokoro==0.9.4")

import torch

from koe.conversion.install import install
from koe.conversion.parity import compare_stages, exceeded
from koe.conversion.taps import Taps
from koe.engine.torch import TorchEngine, TorchOptions

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
    assert next(cuda_speech.engine._model.parameters()).is_cuda  # type: ignore[attr-defined]


def test_on_cuda_the_stages_match_the_int8_graph(cuda_speech: Speech) -> None:
    one = sentence_request(cuda_speech, CUDA_STAGES_TEXT, "af_heart")
    errors = compare_stages(cuda_speech.engine._model, Taps(packaged_model_bytes(), threads=2), one)  # type: ignore[attr-defined]
    assert exceeded(errors) == [], errors


def test_on_cuda_a_segment_sounds_the_same_alone_and_in_a_batch(cuda_speech: Speech) -> None:
    requests = [sentence_request(cuda_speech, text, voice, speed) for text, voice, speed in BATCH_TEXTS]
    assert_batch_members_sound_as_alone(cuda_speech.engine, requests)
