"""KModel's forward pass over a padded batch, masked so that each utterance computes what it would alone.

Upstream's ``KModel.forward`` takes one utterance. Batched naively, padding would leak into real frames
through three things, each handled here:

* **recurrences**: every LSTM runs on packed sequences (the reverse direction would otherwise start in
  the padding);
* **whole-utterance statistics**: every AdaIN instance norm (54 in the acoustic side) takes its mean and
  variance over the utterance's own frames only;
* **neighbours**: every convolution sees zeros past an utterance's end — what its own zero padding gives
  it alone — because its input is re-masked before each convolution (transposed convolutions included).

The harmonic source, its STFT and the final inverse STFT run per utterance: they are cheap, and their
interpolation and reflection at the end of the signal would otherwise see the padding. The source is
deterministic, as in the ONNX export: no random initial phase and no additive noise (upstream draws both
from torch's global generator, so two calls of the same text would differ and a batch could not equal its
members alone).

Text side (ALBERT, duration predictor, text encoder) and acoustic side (F0/energy predictor, decoder,
generator) are separate calls, so a caller can time the words before the audio is decoded. Either pass can
be padded wider and to more rows than its utterances need (``shape``, :mod:`koe.engine.kmodel.buckets`):
extra rows are idle utterances whose results are dropped, extra width is masked like any padding. The
acoustic pass's middle — decoder and generator up to the spectrum, the heaviest part — depends on the
shape alone, not on the lengths in it (:func:`acoustic_core`): a CUDA graph can replay it
(:mod:`koe.engine.kmodel.graphs`); its packed LSTM before and per-utterance source and STFTs around it
cannot be captured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from kokoro.istftnet import AdaIN1d, AdainResBlk1d, AdaINResBlock1, Decoder, Generator
from kokoro.model import KModel
from kokoro.modules import ProsodyPredictor

from koe.engine.kmodel.precision import computing, exact

PAD = 0
#: ref_s[:, :128] styles the decoder, ref_s[:, 128:] the prosody predictor.
STYLE_SPLIT = 128
_RESIDUAL_SCALE = 1 / math.sqrt(2)  # AdainResBlk1d: (residual + shortcut) / sqrt(2)
_GENERATOR_SLOPE = 0.1  # leaky ReLU before each upsampling of the generator


@dataclass(frozen=True, slots=True)
class TextSide:
    """One utterance after the text pass, unpadded: what the acoustic pass needs."""

    durations: torch.Tensor  # [tokens] frames per token, padding tokens included (long)
    prosody: torch.Tensor  # [hidden + style, tokens] duration-encoder features
    text: torch.Tensor  # [hidden, tokens] text-encoder features
    style: torch.Tensor  # [256]

    @property
    def frames(self) -> int:
        return int(self.durations.sum())


class _Valid:
    """Each row's valid length along the last axis of a padded ``[B, C, width]`` tensor."""

    def __init__(self, lengths: torch.Tensor, width: int) -> None:
        self.lengths = lengths
        self.width = width
        positions = torch.arange(width, device=lengths.device)
        self.mask = (positions.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1).float()

    def scaled(self, factor: int, extra: int = 0) -> _Valid:
        return _Valid(self.lengths * factor + extra, self.width * factor + extra)

    def zero(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask


def text_pass(
    model: KModel,
    rows: Sequence[Sequence[int]],
    styles: torch.Tensor,
    speeds: torch.Tensor,
    shape: tuple[int, int] | None = None,
) -> list[TextSide]:
    """Durations and features of each utterance; ``rows`` are token ids without the padding tokens,
    ``styles`` the ``[B, 256]`` style rows, ``speeds`` ``[B]``. ``shape`` pads the pass to that many rows
    and tokens (padding tokens included); raises ``ValueError`` where the utterances do not fit in it."""
    device = styles.device
    padded = [[PAD, *row, PAD] for row in rows]
    total, width = _shape(shape, len(padded), max(len(row) for row in padded), "tokens")
    idle = total - len(padded)
    padded += [[PAD, PAD]] * idle
    styles = torch.cat([styles, styles.new_zeros((idle, styles.shape[1]))])
    speeds = torch.cat([speeds, speeds.new_ones(idle)])
    lengths = torch.tensor([len(row) for row in padded], dtype=torch.long)
    tokens = torch.full((len(padded), width), PAD, dtype=torch.long)
    for r, row in enumerate(padded):
        tokens[r, : len(row)] = torch.tensor(row)
    tokens = tokens.to(device)
    padding = (torch.arange(width).unsqueeze(0) >= lengths.unsqueeze(1)).to(device)
    prosody_style = styles[:, STYLE_SPLIT:]

    with computing(model):
        bert = model.bert(tokens, attention_mask=(~padding).int())
        encoded = model.bert_encoder(bert).transpose(-1, -2)
        prosody = model.predictor.text_encoder(encoded, prosody_style, lengths, padding)
        hidden = _packed_lstm(model.predictor.lstm, prosody, lengths)
        head = torch.sigmoid(model.predictor.duration_proj(hidden)).float()
        text = model.text_encoder(tokens, lengths, padding)
    durations = torch.round(head.sum(dim=-1) / speeds.unsqueeze(1)).clamp(min=1).long()
    return [
        TextSide(durations[r, :n], prosody[r, :n].transpose(0, 1), text[r, :, :n], styles[r])
        for r, n in enumerate(lengths.tolist()[: len(rows)])
    ]


def _shape(shape: tuple[int, int] | None, rows: int, width: int, unit: str) -> tuple[int, int]:
    """``shape``, or the pass's own when None; raises ``ValueError`` where ``rows`` × ``width`` do not fit."""
    if shape is None:
        return rows, width
    if shape[0] < rows or shape[1] < width:
        raise ValueError(
            f"a pass padded to {shape[0]} rows of {shape[1]} {unit} cannot hold {rows} rows, the longest "
            f"{width} {unit}"
        )
    return shape


@dataclass(frozen=True, slots=True)
class AcousticStages:
    """The acoustic pass's tensors, padded ``[B, ...]``, and each utterance's audio: what the ONNX stage
    cut also exposes, so the two backends can be compared stage by stage."""

    aligned_text: torch.Tensor  # [B, 512, W] text features aligned to frames (the decoder's input)
    f0: torch.Tensor  # [B, 2W] F0 curve (Hz)
    energy: torch.Tensor  # [B, 2W]
    decoded: torch.Tensor  # [B, 512, 2W] the frame-rate decoder's output (the generator's input)
    audio: list[torch.Tensor]  # per utterance, frames × 600 samples


@dataclass(frozen=True, slots=True)
class CoreInputs:
    """What :func:`acoustic_core` reads, padded to the pass's shape: the same shapes for the same bucket."""

    text: torch.Tensor  # [B, 512, W] aligned text features
    f0: torch.Tensor  # [B, 2W]
    energy: torch.Tensor  # [B, 2W]
    style: torch.Tensor  # [B, 128] the decoder's half of each style row
    frames: torch.Tensor  # [B] each row's frames (long, on the device)
    harmonics: torch.Tensor  # [B, n_fft + 2, 120W + 1] each row's harmonic source spectrum, zero-padded


@dataclass(frozen=True, slots=True)
class CoreOutputs:
    """What :func:`acoustic_core` gives: the decoder's output and the generator's spectrum, padded, and each
    row's spectrum length."""

    decoded: torch.Tensor  # [B, 512, 2W]
    spectrum: torch.Tensor  # [B, n_fft + 2, 120W + 1] log-magnitude and phase, before the inverse STFT
    lengths: torch.Tensor  # [B] valid spectrum frames per row (long)


#: Runs the acoustic core: :func:`acoustic_core` itself, or a replay of it (:mod:`koe.engine.kmodel.graphs`).
AcousticCore = Callable[[CoreInputs], CoreOutputs]


def acoustic_pass(
    model: KModel,
    sides: Sequence[TextSide],
    shape: tuple[int, int] | None = None,
    core: AcousticCore | None = None,
) -> list[torch.Tensor]:
    """The audio of each utterance (1-D, ``frames × 600`` samples), all in one masked pass."""
    return acoustic_stages(model, sides, shape, core).audio


def acoustic_stages(
    model: KModel,
    sides: Sequence[TextSide],
    shape: tuple[int, int] | None = None,
    core: AcousticCore | None = None,
) -> AcousticStages:
    """:func:`acoustic_pass` with its intermediate tensors (the members' rows only).

    ``shape`` pads the pass to that many rows and frames (raises ``ValueError`` where the utterances do not
    fit); ``core`` runs the middle of the pass in place of :func:`acoustic_core` on ``model``.
    """
    inputs = acoustic_inputs(model, sides, shape)
    outputs = (core or partial(acoustic_core, model))(inputs)
    generator = model.decoder.generator
    bins = generator.post_n_fft // 2 + 1
    audio = []
    with exact(inputs.text.device):
        for r, length in enumerate(outputs.lengths[: len(sides)].tolist()):
            spectrum = outputs.spectrum[r : r + 1, :, :length].float()
            magnitude, phase = torch.exp(spectrum[:, :bins]), torch.sin(spectrum[:, bins:])
            audio.append(generator.stft.inverse(magnitude, phase).reshape(-1))
    members = len(sides)
    return AcousticStages(
        inputs.text[:members], inputs.f0[:members], inputs.energy[:members], outputs.decoded[:members], audio
    )


def acoustic_inputs(
    model: KModel, sides: Sequence[TextSide], shape: tuple[int, int] | None = None
) -> CoreInputs:
    """The acoustic pass up to its core: alignment, the F0 and energy curves (a packed LSTM, whose work
    follows the lengths), each row's harmonic source; padded to ``shape`` (see :func:`acoustic_stages`)."""
    device = sides[0].style.device
    rows, width = _shape(shape, len(sides), max(side.frames for side in sides), "frames")
    idle = _idle_side(sides[0])
    sides = [*sides, *[idle] * (rows - len(sides))]
    frames = torch.tensor([side.frames for side in sides], device=device)
    valid = _Valid(frames, width)
    prosody = torch.zeros((rows, sides[0].prosody.shape[0], width), device=device)
    text = torch.zeros((rows, sides[0].text.shape[0], width), device=device)
    styles = torch.stack([side.style for side in sides])
    with computing(model):
        for r, side in enumerate(sides):
            alignment = _alignment(side.durations)
            prosody[r, :, : side.frames] = side.prosody @ alignment
            text[r, :, : side.frames] = side.text @ alignment
        f0, energy, curves = _prosody_curves(model.predictor, prosody, styles[:, STYLE_SPLIT:], valid)
    harmonics = _harmonics(model.decoder.generator, f0, curves)
    return CoreInputs(text, f0, energy, styles[:, :STYLE_SPLIT], frames, harmonics)


def acoustic_core(model: KModel, inputs: CoreInputs) -> CoreOutputs:
    """Decoder and generator up to the spectrum: no host synchronization and no shape that depends on the
    lengths (they enter as a device tensor, through the masks), so a CUDA graph can capture it."""
    frames = _Valid(inputs.frames, inputs.text.shape[-1])
    curves = frames.scaled(inputs.f0.shape[-1] // frames.width)
    style = inputs.style
    with computing(model):
        decoded, _ = _decode(model.decoder, inputs.text, inputs.f0, inputs.energy, style, frames, curves)
        spectrum, valid = _generate(model.decoder.generator, decoded, style, inputs.harmonics, curves)
    return CoreOutputs(decoded, spectrum, valid.lengths)


def _idle_side(like: TextSide) -> TextSide:
    """A one-frame utterance of zeros: fills a row the pass is padded to; its audio is dropped."""
    device = like.style.device
    return TextSide(
        torch.ones(1, dtype=torch.long, device=device),
        like.prosody.new_zeros((like.prosody.shape[0], 1)),
        like.text.new_zeros((like.text.shape[0], 1)),
        torch.zeros_like(like.style),
    )


def _alignment(durations: torch.Tensor) -> torch.Tensor:
    """The hard token→frame alignment: column f is one-hot on the token that frame f belongs to."""
    device = durations.device
    owners = torch.repeat_interleave(torch.arange(durations.shape[0], device=device), durations)
    alignment = torch.zeros((durations.shape[0], owners.shape[0]), device=device)
    alignment[owners, torch.arange(owners.shape[0], device=device)] = 1
    return alignment


def _packed_lstm(lstm: torch.nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``lstm`` over ``[B, T, C]`` rows of ``lengths``; the padding comes out as zeros."""
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = lstm(packed)
    padded: torch.Tensor = torch.nn.utils.rnn.pad_packed_sequence(
        out, batch_first=True, total_length=x.shape[1]
    )[0]
    return padded


def _instance_norm(x: torch.Tensor, valid: _Valid, eps: float) -> torch.Tensor:
    """In float32 whatever the pass's format (:mod:`koe.engine.kmodel.precision`)."""
    x = x.float()
    count = valid.mask.sum(dim=-1, keepdim=True)
    mean = (x * valid.mask).sum(dim=-1, keepdim=True) / count
    variance = (valid.zero(x - mean) ** 2).sum(dim=-1, keepdim=True) / count
    return (x - mean) * torch.rsqrt(variance + eps)


def _adain(layer: AdaIN1d, x: torch.Tensor, s: torch.Tensor, valid: _Valid) -> torch.Tensor:
    gamma, beta = torch.chunk(layer.fc(s).unsqueeze(-1), 2, dim=1)
    norm = layer.norm
    normalized = _instance_norm(x, valid, norm.eps)
    if norm.affine:
        normalized = normalized * norm.weight[:, None] + norm.bias[:, None]
    return (1 + gamma) * normalized + beta


def _adain_block(
    block: AdainResBlk1d, x: torch.Tensor, s: torch.Tensor, valid: _Valid
) -> tuple[torch.Tensor, _Valid]:
    """``AdainResBlk1d`` masked; returns the output and its validity (doubled by an upsampling block)."""
    upsampling = block.upsample_type != "none"
    out = valid.scaled(2) if upsampling else valid
    residual = block.actv(_adain(block.norm1, x, s, valid))
    if upsampling:
        residual = block.pool(valid.zero(residual))
    residual = block.conv1(out.zero(residual))
    residual = block.actv(_adain(block.norm2, residual, s, out))
    residual = block.conv2(out.zero(residual))
    shortcut = F.interpolate(x, scale_factor=2, mode="nearest") if upsampling else x
    if block.learned_sc:
        shortcut = block.conv1x1(shortcut)
    return (residual + shortcut) * _RESIDUAL_SCALE, out


def _snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    return x + (1 / alpha) * torch.sin(alpha * x) ** 2


def _res_block(block: AdaINResBlock1, x: torch.Tensor, s: torch.Tensor, valid: _Valid) -> torch.Tensor:
    """``AdaINResBlock1`` (Snake activations, dilated convolutions) masked."""
    for conv1, conv2, norm1, norm2, alpha1, alpha2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
    ):
        step = conv1(valid.zero(_snake(_adain(norm1, x, s, valid), alpha1)))
        step = conv2(valid.zero(_snake(_adain(norm2, step, s, valid), alpha2)))
        x = step + x
    return x


def _prosody_curves(
    predictor: ProsodyPredictor, x: torch.Tensor, s: torch.Tensor, valid: _Valid
) -> tuple[torch.Tensor, torch.Tensor, _Valid]:
    """F0 and energy, two values per frame (``[B, 2W]`` each), and their validity."""
    shared = _packed_lstm(predictor.shared, x.transpose(-1, -2), valid.lengths).transpose(-1, -2)
    curves: list[torch.Tensor] = []
    out = valid
    for blocks, projection in ((predictor.F0, predictor.F0_proj), (predictor.N, predictor.N_proj)):
        h, out = shared, valid
        for block in blocks:
            h, out = _adain_block(block, h, s, out)
        curves.append(projection(h).squeeze(1))
    return curves[0], curves[1], out


def _decode(
    decoder: Decoder, asr: torch.Tensor, f0: torch.Tensor, noise: torch.Tensor, s: torch.Tensor,
    frames: _Valid, curves: _Valid,
) -> tuple[torch.Tensor, _Valid]:  # fmt: skip
    """The frame-rate decoder: the generator's input (``[B, 512, 2W]``) and its validity."""
    f0_down = decoder.F0_conv(curves.zero(f0.unsqueeze(1)))
    noise_down = decoder.N_conv(curves.zero(noise.unsqueeze(1)))
    x, valid = _adain_block(decoder.encode, torch.cat([asr, f0_down, noise_down], dim=1), s, frames)
    asr_res = decoder.asr_res(asr)
    residual = True
    for block in decoder.decode:
        if residual:
            x = torch.cat([x, asr_res, f0_down, noise_down], dim=1)
        x, valid = _adain_block(block, x, s, valid)
        residual = residual and block.upsample_type == "none"
    return x, valid


def _harmonics(generator: Generator, f0: torch.Tensor, curves: _Valid) -> torch.Tensor:
    """Each row's harmonic source spectrum (its own F0 curve only), zero-padded to the width the generator's
    last stage has for ``curves.width`` (its STFT frames: samples / hop + 1)."""
    scale = int(generator.f0_upsamp.scale_factor)
    width = curves.width * scale // generator.stft.hop_length + 1
    with exact(f0.device):
        f0 = f0.float()
        spectra = [_harmonic_spectrum(generator, f0[r, :n]) for r, n in enumerate(curves.lengths.tolist())]
    harmonics = f0.new_zeros((len(spectra), spectra[0].shape[0], width))
    for r, spectrum in enumerate(spectra):
        harmonics[r, :, : spectrum.shape[-1]] = spectrum
    return harmonics


def _generate(
    generator: Generator, x: torch.Tensor, s: torch.Tensor, harmonics: torch.Tensor, curves: _Valid
) -> tuple[torch.Tensor, _Valid]:
    """The iSTFTNet generator over the batch up to its spectrum (``[B, n_fft + 2, 120W + 1]``) and that
    spectrum's validity; the source comes in as ``harmonics`` and the inverse STFT is the caller's."""
    valid = curves
    stages = len(generator.ups)
    kernels = generator.num_kernels
    for i, (upsample, noise_conv, noise_res) in enumerate(
        zip(generator.ups, generator.noise_convs, generator.noise_res, strict=True)
    ):
        last = i == stages - 1
        stage = valid.scaled(upsample.stride[0], 1 if last else 0)
        x = F.leaky_relu(x, negative_slope=_GENERATOR_SLOPE)
        source = _res_block(noise_res, noise_conv(harmonics), s, stage)
        x = upsample(valid.zero(x))
        if last:
            x = generator.reflection_pad(x)
        x = x + source
        blocks = generator.resblocks[i * kernels : (i + 1) * kernels]
        x = torch.stack([_res_block(block, x, s, stage) for block in blocks]).sum(dim=0) / kernels
        valid = stage
    return generator.conv_post(valid.zero(F.leaky_relu(x))), valid


def _harmonic_spectrum(generator: Generator, f0: torch.Tensor) -> torch.Tensor:
    """The harmonic source of one utterance's F0 curve, as the STFT magnitude and phase the generator
    mixes in (``[n_fft + 2, frames]``); deterministic (see the module docstring)."""
    sine = generator.m_source.l_sin_gen
    scale = int(generator.f0_upsamp.scale_factor)
    hz = f0.repeat_interleave(scale)
    harmonics = torch.arange(1, sine.dim + 1, device=f0.device, dtype=f0.dtype)
    cycles = (hz.unsqueeze(0) * harmonics.unsqueeze(1) / sine.sampling_rate) % 1
    cycles = F.interpolate(cycles.unsqueeze(0), scale_factor=1 / scale, mode="linear")
    phase = torch.cumsum(cycles, dim=-1) * 2 * math.pi
    phase = F.interpolate(phase * scale, scale_factor=scale, mode="linear")
    voiced = (hz > sine.voiced_threshold).float()
    waves = torch.sin(phase[0]) * sine.sine_amp * voiced
    merged = torch.tanh(generator.m_source.l_linear(waves.transpose(0, 1))).transpose(0, 1)
    magnitude, angle = generator.stft.transform(merged)
    return torch.cat([magnitude, angle], dim=1)[0]
