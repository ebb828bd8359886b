"""Zonos's codebook delay pattern, seen from its per-step generation callback.

Zonos predicts 9 codebooks per audio frame with a delay: codebook k of frame t is generated at
step position t + k + 1 of a delayed buffer, so a frame is complete 9 positions after it starts.
Its `generate()` fills position 1 while prefilling the conditioning, then position `step + 1` at
callback step `step` (1-based), handing the callback a one-position view of that buffer. Its
final output keeps `step + 1 - 9` frames, which never includes the frame where codebook 0 said
end-of-speech; `complete_frames` counts the same way so streamed and final frames agree."""
from __future__ import annotations

import torch

from foresay.engine.tts.errors import SynthesisFailed


def complete_frames(step: int, n_codebooks: int) -> int:
    """Frames fully generated after callback step `step` (no audio prefix)."""
    return max(0, step + 1 - n_codebooks)


def delayed_history(frame: torch.Tensor, step: int) -> torch.Tensor:
    """The delayed code buffer [1, n_codebooks, step + 2] that `frame` (the callback's view of
    position step + 1) is a slice of. Checks the layout, since it is Zonos's, not a contract."""
    if frame.dim() != 3 or frame.shape[0] != 1 or frame.shape[2] != 1 or frame.stride(2) != 1:
        raise SynthesisFailed(f"Zonos's generation callback passed an unexpected frame {tuple(frame.shape)}; "
                              "this Zonos version is not one Foresay supports")
    if frame.storage_offset() != step + 1 or frame.stride(1) < step + 2:
        raise SynthesisFailed("Zonos's generation callback frame is not a view of its delayed code buffer at "
                              f"step {step}; this Zonos version is not one Foresay supports")
    return frame.as_strided((1, frame.shape[1], step + 2), frame.stride(), 0)


def undelay(history: torch.Tensor, start: int, end: int, token_limit: int = 1024) -> torch.Tensor:
    """Codes [1, n_codebooks, end - start] of frames start..end-1 from a delayed buffer; end-of-speech
    and mask tokens (>= token_limit) become 0, as Zonos does before decoding."""
    n_q = history.shape[1]
    if start < 0 or start > end or (end > start and end > history.shape[2] - n_q):
        raise SynthesisFailed(f"frames {start}..{end} are not complete in a buffer of {history.shape[2]} positions")
    positions = torch.arange(start, end, device=history.device)[None, :] + torch.arange(1, n_q + 1, device=history.device)[:, None]
    codes = torch.gather(history[0], 1, positions)
    return codes.masked_fill(codes >= token_limit, 0).unsqueeze(0)
