"""The GPU backend: hexgrad's ``kokoro`` KModel in PyTorch, batching utterances from many sessions.

Install with ``pip install 'koe[gpu]'`` and then ``pip install --no-deps kokoro==0.9.4``: kokoro declares
``misaki[en]``, whose ``phonemizer-fork`` overwrites the ``phonemizer`` module koe's G2P uses, while
``KModel`` itself needs only torch, transformers, loguru, huggingface_hub and attrs (the extra's list).

Batching is split where the model allows it exactly. The text side (ALBERT, the duration predictor, the
text encoder) takes padded batches: attention is masked and every LSTM runs on packed sequences, so a
padded row computes what it would alone. The acoustic side (F0/noise predictor and the iSTFTNet decoder)
normalizes each utterance over its whole length (AdaIN's instance norm), so padding frames would change
the audio: utterances are grouped by equal frame count there, and only equal-length groups share a pass.
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
import threading
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from kokoro.model import KModel

from koe.engine.assets import cache_dir
from koe.engine.base import BufferedAudio, Capabilities, SynthesisRequest, UtteranceStream, WholeStream
from koe.engine.vocab import kokoro_config, tokenize
from koe.errors import AssetError, ConfigError, SynthesisError
from koe.types import SAMPLE_RATE, Audio, StyleTable

logger = logging.getLogger(__name__)

HF_REPO = "hexgrad/Kokoro-82M"
WEIGHTS_FILE = "kokoro-v1_0.pth"
#: sha256 of ``kokoro-v1_0.pth`` (hexgrad/Kokoro-82M, revision f3ff357), as several independent projects
#: pin it; no copy is reachable from the machine koe is developed on, so it was not hashed here.
WEIGHTS_SHA256 = "496dba118d1a58f5f3db2efc88dbdc216e0483fc89fe6e47ee1f2c53f18ad1e4"
#: The checkpoint's top-level keys: one state dict per KModel component.
COMPONENTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
#: Upstream saved the components wrapped in ``DataParallel``; its keys carry this prefix.
_PARALLEL_PREFIX = "module."

#: Utterances per text-side pass; bounds GPU memory (each row is padded to the longest in its pass).
DEFAULT_MAX_BATCH = 16
_PAD = 0
_STYLE_SPLIT = 128  # ref_s[:, :128] styles the decoder, ref_s[:, 128:] the prosody predictor
_STYLE_ROWS, _STYLE_WIDTH = 510, 256

#: Polled with an index into the batch; True means the caller no longer wants that utterance.
CancelCheck = Callable[[int], bool]


@dataclass(frozen=True, slots=True)
class TorchOptions:
    """Where and how wide to run; ``device=None`` picks CUDA when available, else the CPU.

    ``threads`` sets torch's CPU threads, which is process-wide; None keeps torch's default.
    """

    device: str | None = None
    max_batch: int = DEFAULT_MAX_BATCH
    threads: int | None = None


@dataclass(frozen=True, slots=True)
class _TextSide:
    """One utterance after the batched text pass: what the acoustic pass needs, unpadded."""

    durations: torch.Tensor  # [tokens] frames per token
    prosody: torch.Tensor  # [hidden + style, tokens] predictor features
    text: torch.Tensor  # [hidden, tokens] text-encoder features
    style: torch.Tensor  # [256]

    @property
    def frames(self) -> int:
        return int(self.durations.sum())


def default_weights_path() -> Path:
    return cache_dir() / "torch" / WEIGHTS_FILE


def verify_file(path: Path, expected_sha256: str) -> Path:
    """Hash ``path`` in a stream (the checkpoint is 313 MiB) and raise ``AssetError`` on a mismatch."""
    with path.open("rb") as handle:
        got = hashlib.file_digest(handle, "sha256").hexdigest()
    if got != expected_sha256:
        raise AssetError(f"{path}: sha256 {got} does not match the pinned {expected_sha256}")
    return path


def install_weights(target: Path | None = None) -> Path:
    """Download ``kokoro-v1_0.pth`` from Hugging Face into koe's cache once, verified (needs internet)."""
    target = target or default_weights_path()
    if target.is_file():
        return verify_file(target, WEIGHTS_SHA256)
    from huggingface_hub import hf_hub_download

    target.parent.mkdir(parents=True, exist_ok=True)
    downloaded = Path(hf_hub_download(HF_REPO, WEIGHTS_FILE, local_dir=target.parent))
    return verify_file(downloaded, WEIGHTS_SHA256)


def load_voice_tensors(directory: Path) -> dict[str, StyleTable]:
    """Voices saved by upstream as ``<name>.pt`` tensors (510×1×256), loaded with ``weights_only``."""
    tables: dict[str, StyleTable] = {}
    for path in sorted(directory.glob("*.pt")):
        try:
            tensor = torch.load(path, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError, pickle.UnpicklingError) as exc:
            raise AssetError(f"voice {path} is not a tensor file torch can load safely: {exc}") from exc
        if not isinstance(tensor, torch.Tensor) or tensor.numel() != _STYLE_ROWS * _STYLE_WIDTH:
            raise AssetError(f"voice {path} is not a {_STYLE_ROWS}×1×{_STYLE_WIDTH} tensor")
        tables[path.stem] = tensor.to(torch.float32).reshape(_STYLE_ROWS, 1, _STYLE_WIDTH).numpy()
    return tables


def _empty_checkpoint() -> io.BytesIO:
    """KModel always loads a checkpoint in ``__init__``; an empty one leaves it to us to load strictly."""
    buffer = io.BytesIO()
    torch.save({}, buffer)
    buffer.seek(0)
    return buffer


def build_model(config: Mapping[str, object] | None = None) -> KModel:
    """KModel's architecture from ``config`` (default: the packaged config.json), with random weights."""
    with warnings.catch_warnings():
        # Upstream's architecture, not ours to change: a 1-layer LSTM declared with dropout, and the
        # legacy weight_norm its checkpoint's parameter names depend on.
        warnings.filterwarnings("ignore", "dropout option adds dropout", UserWarning)
        warnings.filterwarnings("ignore", "`torch.nn.utils.weight_norm` is deprecated", FutureWarning)
        model = KModel(repo_id=HF_REPO, config=dict(config or kokoro_config()), model=_empty_checkpoint())
    return model.eval()


def load_checkpoint(model: KModel, path: Path) -> KModel:
    """Load a ``.pth`` into ``model`` with ``weights_only=True``, every component strictly.

    Upstream falls back to ``strict=False`` and so turns a truncated or renamed checkpoint into a model
    with random parts; here any missing component or key is an ``AssetError``.
    """
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (OSError, RuntimeError, pickle.UnpicklingError) as exc:
        raise AssetError(f"cannot load checkpoint {path}: {exc}") from exc
    if not isinstance(checkpoint, dict) or set(checkpoint) != set(COMPONENTS):
        got = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise AssetError(f"checkpoint {path} must hold the components {list(COMPONENTS)}, got {got}")
    for name in COMPONENTS:
        state = {key.removeprefix(_PARALLEL_PREFIX): value for key, value in checkpoint[name].items()}
        try:
            getattr(model, name).load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise AssetError(f"checkpoint {path}: component {name!r} does not fit the model: {exc}") from exc
    return model


def choose_device(requested: str | None) -> torch.device:
    if requested is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {requested!r} was requested but torch sees no CUDA device")
    return torch.device(requested)


class TorchEngine:
    """KModel on one device. One worker thread calls it; batching happens inside ``synthesize_batch``."""

    name = "torch"
    sample_rate = SAMPLE_RATE

    def __init__(self, model: KModel, options: TorchOptions | None = None) -> None:
        options = options or TorchOptions()
        if options.max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, got {options.max_batch}")
        self._max_batch = options.max_batch
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        self.device = choose_device(options.device)
        self._model = model.to(self.device).eval()
        self.capabilities = Capabilities(max_batch=self._max_batch)
        logger.info("torch engine on %s, text batches of up to %d", self.device, self._max_batch)

    @classmethod
    def load(cls, weights: Path | None = None, options: TorchOptions | None = None) -> TorchEngine:
        """The real model: packaged config.json + ``weights`` (default: koe's cache, ``install_weights``)."""
        path = weights or default_weights_path()
        if not path.is_file():
            raise AssetError(f"PyTorch weights {path} are missing: run `koe install --engine torch`")
        return cls(load_checkpoint(build_model(), path), options)

    def synthesize(self, request: SynthesisRequest) -> Audio:
        return self.synthesize_batch([request])[0]

    def prepare(self, style: StyleTable) -> None:
        """Nothing to prepare: this backend decodes whole utterances."""

    def stream(
        self,
        request: SynthesisRequest,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
    ) -> UtteranceStream:
        """The whole utterance in one step (this backend has no windowed decoder)."""
        tokenize(request.phonemes)  # refuse an over-long utterance now
        return WholeStream(lambda: self.synthesize(request), cancel)

    def synthesize_batch(
        self, requests: Sequence[SynthesisRequest], is_cancelled: CancelCheck | None = None
    ) -> list[Audio]:
        """Synthesize ``requests`` in as few passes as exactness allows; results keep the input order.

        ``is_cancelled(i)`` is polled after the text pass and before each acoustic pass; a cancelled
        utterance gets an empty array and costs no further GPU time. Raises ``SynthesisError`` for
        phonemes past the model's window or a failing forward pass.
        """
        ids = [tokenize(request.phonemes) for request in requests]
        results: list[Audio] = [np.zeros(0, dtype=np.float32) for _ in requests]
        live = sorted((i for i, tokens in enumerate(ids) if tokens), key=lambda i: len(ids[i]))
        try:
            with torch.inference_mode():
                text_sides: dict[int, _TextSide] = {}
                for start in range(0, len(live), self._max_batch):
                    chunk = live[start : start + self._max_batch]
                    text_sides.update(zip(chunk, self._text_pass(chunk, ids, requests), strict=True))
                groups: dict[int, list[int]] = defaultdict(list)
                for index in live:
                    groups[text_sides[index].frames].append(index)
                for members in groups.values():
                    wanted = [i for i in members if not (is_cancelled and is_cancelled(i))]
                    for start in range(0, len(wanted), self._max_batch):
                        chunk = wanted[start : start + self._max_batch]
                        audio = self._acoustic_pass([text_sides[i] for i in chunk])
                        for index, row in zip(chunk, audio, strict=True):
                            results[index] = row
        except (RuntimeError, ValueError) as exc:
            raise SynthesisError(f"PyTorch inference failed on a batch of {len(requests)}: {exc}") from exc
        return results

    def _text_pass(
        self, chunk: list[int], ids: list[list[int]], requests: Sequence[SynthesisRequest]
    ) -> list[_TextSide]:
        """ALBERT, duration predictor and text encoder over one padded batch, masked per row."""
        model, device = self._model, self.device
        rows = [[_PAD, *ids[i], _PAD] for i in chunk]
        lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
        width = int(lengths.max())
        tokens = torch.full((len(rows), width), _PAD, dtype=torch.long)
        for r, row in enumerate(rows):
            tokens[r, : len(row)] = torch.tensor(row)
        tokens = tokens.to(device)
        padding = (torch.arange(width).unsqueeze(0) >= lengths.unsqueeze(1)).to(device)
        styles = torch.from_numpy(np.stack([requests[i].style[len(ids[i]) - 1, 0] for i in chunk])).to(device)
        speeds = torch.tensor([requests[i].speed for i in chunk], dtype=torch.float32, device=device)
        prosody_style = styles[:, _STYLE_SPLIT:]

        bert = model.bert(tokens, attention_mask=(~padding).int())
        encoded = model.bert_encoder(bert).transpose(-1, -2)
        prosody = model.predictor.text_encoder(encoded, prosody_style, lengths, padding)
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            prosody, lengths, batch_first=True, enforce_sorted=False
        )
        hidden, _ = model.predictor.lstm(packed)
        hidden, _ = torch.nn.utils.rnn.pad_packed_sequence(hidden, batch_first=True, total_length=width)
        frames = torch.sigmoid(model.predictor.duration_proj(hidden)).sum(dim=-1) / speeds.unsqueeze(1)
        durations = torch.round(frames).clamp(min=1).long()
        text = model.text_encoder(tokens, lengths, padding)
        return [
            _TextSide(
                durations=durations[r, :n],
                prosody=prosody[r, :n].transpose(0, 1),
                text=text[r, :, :n],
                style=styles[r],
            )
            for r, n in enumerate(lengths.tolist())
        ]

    def _acoustic_pass(self, sides: list[_TextSide]) -> list[Audio]:
        """F0/noise prediction and the decoder for utterances of one frame count, in one pass."""
        model = self._model
        alignments = [self._alignment(side.durations) for side in sides]
        prosody = torch.stack([side.prosody @ a for side, a in zip(sides, alignments, strict=True)])
        text = torch.stack([side.text @ a for side, a in zip(sides, alignments, strict=True)])
        styles = torch.stack([side.style for side in sides])
        f0, noise = model.predictor.F0Ntrain(prosody, styles[:, _STYLE_SPLIT:])
        audio = model.decoder(text, f0, noise, styles[:, :_STYLE_SPLIT]).reshape(len(sides), -1)
        return [row.float().cpu().numpy() for row in audio]

    def _alignment(self, durations: torch.Tensor) -> torch.Tensor:
        """The hard token→frame alignment: column f is one-hot on the token that frame f belongs to."""
        owners = torch.repeat_interleave(torch.arange(durations.shape[0], device=self.device), durations)
        alignment = torch.zeros((durations.shape[0], owners.shape[0]), device=self.device)
        alignment[owners, torch.arange(owners.shape[0], device=self.device)] = 1
        return alignment
