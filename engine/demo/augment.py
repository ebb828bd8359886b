"""Augmentation of log-mel features for the demo Whisper pair, applied per training batch.

Held-out voices differ from the training voices in formants and pitch, so a model that hears each
training request in one voice only learns that voice's spectra. Each clip is therefore shifted in
time (the endpointer's pre-roll varies too), warped along the mel axis (a vocal-tract-length
perturbation), and masked in one frequency band and two time spans (SpecAugment). Padding stays
padding: shifts and time masks fill with the clip's own padding frame.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AugmentConfig:
    """max_shift: frames a clip may move right. warp: mel-axis scale drawn from [1 - warp, 1 + warp].
    freq_mask / time_mask: widest masked band (mel bins) / span (frames); time_masks: spans per clip.
    max_tail: silent frames a clip may gain at its end (the LLM-ASR trainer; Whisper's window is
    always padded with silence anyway)."""
    max_shift: int = 40
    warp: float = 0.12
    freq_mask: int = 8
    time_mask: int = 10
    time_masks: int = 2
    max_tail: int = 0

    def __post_init__(self):
        if min(self.max_shift, self.freq_mask, self.time_mask, self.time_masks, self.max_tail) < 0 or not 0 <= self.warp < 0.5:
            raise ValueError("augmentation sizes must be >= 0 and warp in [0, 0.5)")


def _draw(low: float, high: float, gen: torch.Generator) -> float:
    return low + (high - low) * float(torch.rand((), generator=gen))


def _int(high: int, gen: torch.Generator) -> int:
    """Uniform integer in 0..high."""
    return int(torch.randint(0, high + 1, (), generator=gen))


def warp_mel(clip: torch.Tensor, scale: float) -> torch.Tensor:
    """`clip` [mels, frames] with bin i taking the (interpolated) value of bin i * scale."""
    mels = clip.shape[0]
    source = (torch.arange(mels, dtype=torch.float32) * scale).clamp(max=mels - 1)
    low = source.floor().long()
    high = (low + 1).clamp(max=mels - 1)
    weight = (source - low).unsqueeze(1)
    return clip[low] * (1 - weight) + clip[high] * weight


def shift_right(clip: torch.Tensor, frames: int) -> torch.Tensor:
    """`clip` delayed by `frames`, the gap filled with its last (padding) frame."""
    if frames <= 0:
        return clip
    pad = clip[:, -1:].expand(-1, frames)
    return torch.cat([pad, clip[:, :-frames]], dim=1)


def augment(features: torch.Tensor, lengths: list[int], config: AugmentConfig, gen: torch.Generator) -> torch.Tensor:
    """An augmented copy of `features` [batch, mels, frames]; `lengths` are the frames each clip's
    speech covers (the rest is padding), which bounds its shift."""
    out = []
    for clip, length in zip(features, lengths):
        frames = clip.shape[1]
        pad = clip[:, -1:].clone()
        clip = shift_right(clip, _int(min(config.max_shift, max(0, frames - length)), gen))
        if config.warp:
            clip = warp_mel(clip, _draw(1 - config.warp, 1 + config.warp, gen))
        else:
            clip = clip.clone()
        if config.freq_mask:
            width = _int(config.freq_mask, gen)
            start = _int(clip.shape[0] - width, gen)
            clip[start:start + width] = clip.mean()
        for _ in range(config.time_masks if config.time_mask else 0):
            width = _int(config.time_mask, gen)
            start = _int(frames - width, gen)
            clip[:, start:start + width] = pad
        out.append(clip)
    return torch.stack(out)
