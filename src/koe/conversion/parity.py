"""The PyTorch forward against the int8 ONNX graph, stage by stage, on one utterance.

With the same durations (the graph's, fed to the PyTorch acoustic side) every intermediate tensor and the
audio can be compared element for element (the audio with the quality gate's log-mel measures); the
durations themselves are compared free-running. The int8 graph quantizes its activations on the fly and the
derived weights keep its weight rounding, so the two are close, not equal: :data:`TOLERANCES` says how
close, and ``docs/engine.md`` ("PyTorch engine") what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt
import torch
from kokoro.model import KModel

from koe.conversion.taps import Taps
from koe.engine.base import SynthesisRequest
from koe.engine.kmodel.forward import TextSide, acoustic_stages, text_pass
from koe.engine.kmodel.precision import computing
from koe.engine.quality import compare
from koe.engine.vocab import tokenize

#: The export's inverse STFT gives exactly 1.5× what ``torch.istft`` gives on the same spectrum (measured:
#: least-squares scale 0.66667, residual 2e-6): the ONNX audio is 3.5 dB louder than upstream PyTorch's by
#: construction. The torch engine keeps upstream's level; comparisons take the gain out first.
EXPORT_ISTFT_GAIN = 1.5


@dataclass(frozen=True, slots=True)
class StageErrors:
    """How far PyTorch is from the graph. Relative errors are ‖torch − onnx‖ / ‖onnx‖ over the tensor."""

    raw_durations_frames: float  # largest |Δ| of a token's duration before rounding, in frames
    durations_changed: float  # share of tokens whose rounded duration differs
    aligned_text: float  # relative error, the graph's durations on both sides
    f0: float  # relative error
    energy: float  # relative error
    decoded: float  # relative error
    audio_distance_db: float  # mean log-mel distance of the audio (the graph's durations, level matched)
    audio_level_db: float  # |RMS level difference| left after the export's iSTFT gain
    audio_length_frames: int  # |frames torch − frames onnx|, each with its own durations


#: Bounds every derived-weight comparison must keep (measured values are about a third of these; see
#: docs/engine.md). The audio bound is below the model's own take-to-take variation (~3 dB).
TOLERANCES = StageErrors(
    raw_durations_frames=0.5,
    durations_changed=0.1,
    aligned_text=0.02,
    f0=0.05,
    energy=0.05,
    decoded=0.12,
    audio_distance_db=3.0,
    audio_level_db=1.0,
    audio_length_frames=2,
)


def exceeded(errors: StageErrors, tolerances: StageErrors = TOLERANCES) -> list[str]:
    """The stages (with values) outside ``tolerances``; empty when all are within."""
    return [
        f"{field.name} {getattr(errors, field.name):.4g} > {getattr(tolerances, field.name):.4g}"
        for field in fields(StageErrors)
        if getattr(errors, field.name) > getattr(tolerances, field.name)
    ]


def compare_stages(model: KModel, taps: Taps, request: SynthesisRequest) -> StageErrors:
    """Run ``request`` through both and measure each stage (``model`` on its own device)."""
    ids = tokenize(request.phonemes)
    style_row = request.style[len(ids) - 1]
    reference = taps.run(ids, style_row, request.speed)
    device = next(model.parameters()).device
    with torch.inference_mode():
        styles = torch.from_numpy(style_row).to(device)
        speeds = torch.tensor([request.speed], device=device)
        (side,) = text_pass(model, [ids], styles, speeds)
        raw = _raw_durations(model, side, request.speed)
        forced = TextSide(
            torch.from_numpy(reference.durations).to(device), side.prosody, side.text, side.style
        )
        stages = acoustic_stages(model, [forced])
    torch_durations = side.durations.cpu().numpy()
    audio = compare(stages.audio[0].float().cpu().numpy() * np.float32(EXPORT_ISTFT_GAIN), reference.audio)
    return StageErrors(
        raw_durations_frames=float(np.abs(raw - reference.raw_durations).max()),
        durations_changed=float(np.mean(torch_durations != reference.durations)),
        aligned_text=_relative(stages.aligned_text[0], reference.aligned_text),
        f0=_relative(stages.f0[0], reference.f0),
        energy=_relative(stages.energy[0], reference.energy),
        decoded=_relative(stages.decoded[0], reference.decoded),
        audio_distance_db=audio.distance_db,
        audio_level_db=abs(audio.level_db),
        audio_length_frames=abs(int(torch_durations.sum()) - int(reference.durations.sum())),
    )


def _raw_durations(model: KModel, side: TextSide, speed: float) -> npt.NDArray[np.float32]:
    """The duration head's frames per token before rounding, recomputed from the text side."""
    with computing(model):
        hidden, _ = model.predictor.lstm(side.prosody.transpose(0, 1).unsqueeze(0))
        head = torch.sigmoid(model.predictor.duration_proj(hidden)).float()
    frames = head.sum(dim=-1) / speed
    values: npt.NDArray[np.float32] = frames[0].float().cpu().numpy()
    return values


def _relative(candidate: torch.Tensor, reference: npt.NDArray[np.float32]) -> float:
    value = candidate.float().cpu().numpy().reshape(reference.shape)
    return float(np.linalg.norm(value - reference) / max(float(np.linalg.norm(reference)), 1e-12))
