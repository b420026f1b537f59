"""The int8 graph's intermediate tensors for one utterance: the reference the PyTorch engine is held to.

The stage cut (:mod:`koe.engine.onnx.stages`) names the tensors between the model's parts; this exposes the
ones PyTorch computes too — durations before and after rounding, the aligned text features, the F0 and
energy curves, the frame-rate decoder's output — as extra outputs of one session over the whole graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx.utils import Extractor

from koe.engine.onnx.stages import DECODED, DURATIONS, ENERGY
from koe.errors import AssetError, SynthesisError

RAW_DURATIONS = "/encoder/Div_output_0"  # float [1, n + 2]: frames per token before rounding
ALIGNED_TEXT = "/encoder/MatMul_1_output_0"  # float [1, 512, T]: text features aligned to frames
F0 = "/encoder/Reshape_output_0"  # float [1, 2T]: F0 curve (Hz)
_AUDIO = "audio"
_INPUTS = ("tokens", "style", "speed")
_OUTPUTS = (RAW_DURATIONS, DURATIONS, ALIGNED_TEXT, F0, ENERGY, DECODED, _AUDIO)

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Tapped:
    """One utterance through the int8 graph, batch axis dropped."""

    raw_durations: FloatArray  # [n + 2]
    durations: npt.NDArray[np.int64]  # [n + 2]
    aligned_text: FloatArray  # [512, T]
    f0: FloatArray  # [2T]
    energy: FloatArray  # [2T]
    decoded: FloatArray  # [512, 2T]
    audio: FloatArray  # [600 T]


class Taps:
    """A session over the whole int8 graph that also returns the tensors above."""

    def __init__(self, model: bytes, threads: int = 1) -> None:
        try:
            proto = onnx.load_from_string(model)
            tapped = Extractor(proto).extract_model(list(_INPUTS), list(_OUTPUTS))
        except Exception as exc:  # onnx raises assorted errors on other graphs
            raise AssetError(f"the graph has no tensors {list(_OUTPUTS)} to tap: {exc}") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            tapped.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    def run(self, ids: list[int], style_row: FloatArray, speed: float = 1.0) -> Tapped:
        """The tensors for token ``ids`` (without the padding tokens) and one ``[1, 256]`` style row."""
        feeds = {
            "tokens": np.array([[0, *ids, 0]], dtype=np.int64),
            "style": style_row,
            "speed": np.array([speed], dtype=np.float32),
        }
        try:
            values = self._session.run(list(_OUTPUTS), feeds)
        except Exception as exc:  # onnxruntime's errors are untyped
            raise SynthesisError(f"the tapped graph failed: {exc}") from exc
        raw, durations, aligned, f0, energy, decoded, audio = values
        return Tapped(
            raw.reshape(-1), np.asarray(durations, dtype=np.int64).reshape(-1), aligned[0],
            f0.reshape(-1), energy.reshape(-1), decoded[0], audio.reshape(-1),
        )  # fmt: skip
