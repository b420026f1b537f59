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
generator) are separate calls, so a caller can time the words before the audio is decoded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from kokoro.istftnet import AdaIN1d, AdainResBlk1d, AdaINResBlock1, Decoder, Generator
from kokoro.model import KModel
from kokoro.modules import ProsodyPredictor

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
    model: KModel, rows: Sequence[Sequence[int]], styles: torch.Tensor, speeds: torch.Tensor
) -> list[TextSide]:
    """Durations and features of each utterance; ``rows`` are token ids without the padding tokens,
    ``styles`` the ``[B, 256]`` style rows, ``speeds`` ``[B]``."""
    device = styles.device
    padded = [[PAD, *row, PAD] for row in rows]
    lengths = torch.tensor([len(row) for row in padded], dtype=torch.long)
    width = int(lengths.max())
    tokens = torch.full((len(padded), width), PAD, dtype=torch.long)
    for r, row in enumerate(padded):
        tokens[r, : len(row)] = torch.tensor(row)
    tokens = tokens.to(device)
    padding = (torch.arange(width).unsqueeze(0) >= lengths.unsqueeze(1)).to(device)
    prosody_style = styles[:, STYLE_SPLIT:]

    bert = model.bert(tokens, attention_mask=(~padding).int())
    encoded = model.bert_encoder(bert).transpose(-1, -2)
    prosody = model.predictor.text_encoder(encoded, prosody_style, lengths, padding)
    hidden = _packed_lstm(model.predictor.lstm, prosody, lengths)
    frames = torch.sigmoid(model.predictor.duration_proj(hidden)).sum(dim=-1) / speeds.unsqueeze(1)
    durations = torch.round(frames).clamp(min=1).long()
    text = model.text_encoder(tokens, lengths, padding)
    return [
        TextSide(durations[r, :n], prosody[r, :n].transpose(0, 1), text[r, :, :n], styles[r])
        for r, n in enumerate(lengths.tolist())
    ]


@dataclass(frozen=True, slots=True)
class AcousticStages:
    """The acoustic pass's tensors, padded ``[B, ...]``, and each utterance's audio: what the ONNX stage
    cut also exposes, so the two backends can be compared stage by stage."""

    aligned_text: torch.Tensor  # [B, 512, W] text features aligned to frames (the decoder's input)
    f0: torch.Tensor  # [B, 2W] F0 curve (Hz)
    energy: torch.Tensor  # [B, 2W]
    decoded: torch.Tensor  # [B, 512, 2W] the frame-rate decoder's output (the generator's input)
    audio: list[torch.Tensor]  # per utterance, frames × 600 samples


def acoustic_pass(model: KModel, sides: Sequence[TextSide]) -> list[torch.Tensor]:
    """The audio of each utterance (1-D, ``frames × 600`` samples), all in one masked pass."""
    return acoustic_stages(model, sides).audio


def acoustic_stages(model: KModel, sides: Sequence[TextSide]) -> AcousticStages:
    """:func:`acoustic_pass` with its intermediate tensors."""
    device = sides[0].style.device
    frames = torch.tensor([side.frames for side in sides], device=device)
    valid = _Valid(frames, int(frames.max()))
    prosody = torch.zeros((len(sides), sides[0].prosody.shape[0], valid.width), device=device)
    text = torch.zeros((len(sides), sides[0].text.shape[0], valid.width), device=device)
    for r, side in enumerate(sides):
        alignment = _alignment(side.durations)
        prosody[r, :, : side.frames] = side.prosody @ alignment
        text[r, :, : side.frames] = side.text @ alignment
    styles = torch.stack([side.style for side in sides])
    f0, energy, curves = _prosody_curves(model.predictor, prosody, styles[:, STYLE_SPLIT:], valid)
    decoded, _ = _decode(model.decoder, text, f0, energy, styles[:, :STYLE_SPLIT], valid, curves)
    audio = _generate(model.decoder.generator, decoded, styles[:, :STYLE_SPLIT], f0, curves)
    return AcousticStages(text, f0, energy, decoded, audio)


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


def _generate(
    generator: Generator, x: torch.Tensor, s: torch.Tensor, f0: torch.Tensor, curves: _Valid
) -> list[torch.Tensor]:
    """The iSTFTNet generator over the batch; source and (inverse) STFTs per utterance."""
    lengths = curves.lengths.tolist()
    spectra = [_harmonic_spectrum(generator, f0[r, :length]) for r, length in enumerate(lengths)]
    harmonics = torch.zeros(
        (len(spectra), spectra[0].shape[0], max(h.shape[-1] for h in spectra)), device=x.device
    )
    for r, spectrum in enumerate(spectra):
        harmonics[r, :, : spectrum.shape[-1]] = spectrum
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
    x = generator.conv_post(valid.zero(F.leaky_relu(x)))
    bins = generator.post_n_fft // 2 + 1
    audio = []
    for r, length in enumerate(valid.lengths.tolist()):
        spec, phase = torch.exp(x[r : r + 1, :bins, :length]), torch.sin(x[r : r + 1, bins:, :length])
        audio.append(generator.stft.inverse(spec, phase).reshape(-1))
    return audio


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
