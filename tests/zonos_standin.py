"""A STAND-IN for Zonos (zonos.model.Zonos), for tests only: it follows Zonos's documented API
(`prepare_conditioning`, `generate(..., callback=...)` with the 9-codebook delay pattern and
end-of-speech handling, `autoencoder.decode`, `make_speaker_embedding`) but its "speech" is a
deterministic function of the text: frame t's codes depend on t, its audio on its codes only.
It is not Zonos and produces no speech."""
from __future__ import annotations

import threading

import torch

N_Q = 9
EOS = 1024
MASK = 1025
HOP = 512


def standin_code(t: int, k: int) -> int:
    return (t * 37 + k * 101 + 5) % 1024


class StandInAutoencoder:
    sampling_rate = 44_100
    num_codebooks = N_Q

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """[1, 9, n] codes -> [1, 1, n * 512] audio; each frame a sine set by its own codes."""
        assert codes.dim() == 3 and codes.shape[1] == N_Q and (codes.numel() == 0 or int(codes.max()) < 1024)
        n = codes.shape[2]
        phase = torch.arange(HOP, dtype=torch.float32) / HOP
        freq = 2 + codes[0, 0].float()[:, None] / 64
        level = 0.1 + 0.4 * codes[0, 1].float()[:, None] / 1024
        return (level * torch.sin(2 * torch.pi * freq * phase)).reshape(1, 1, n * HOP)


class StandInZonos:
    """Speaks `frames_per_char` frames per character of the conditioning's text, then says EOS."""

    eos_token_id = EOS
    masked_token_id = MASK
    device = torch.device("cpu")

    def __init__(self, frames_per_char: int = 2) -> None:
        self.frames_per_char = frames_per_char
        self.autoencoder = StandInAutoencoder()
        self.steps = 0               # generation steps run, over all calls
        self.generate_calls = 0
        self.stopped_early = 0       # generations ended by the callback returning False
        self.step_threads: set[str] = set()
        self.speaker_clips = 0

    def can_use_cudagraphs(self) -> bool:
        return False

    def make_speaker_embedding(self, wav: torch.Tensor, sr: int) -> torch.Tensor:
        self.speaker_clips += 1
        return torch.ones(1, 128)

    def prepare_conditioning(self, cond_dict: dict, uncond_dict: dict | None = None) -> torch.Tensor:
        (text,), _ = cond_dict["espeak"]
        # The conditioning's length carries the text's frame count (Zonos's carries its phonemes).
        return torch.zeros(2, max(1, len(text) * self.frames_per_char), 4)

    @torch.inference_mode()
    def generate(self, prefix_conditioning, audio_prefix_codes=None, max_new_tokens=86 * 30, cfg_scale=2.0,
                 batch_size=1, sampling_params=dict(min_p=0.1), progress_bar=True, disable_torch_compile=False,
                 callback=None) -> torch.Tensor:
        assert audio_prefix_codes is None and batch_size == 1 and cfg_scale != 1
        self.generate_calls += 1
        speech_frames = prefix_conditioning.shape[1]
        length = max_new_tokens + N_Q
        delayed = torch.full((1, N_Q, length), -1, dtype=torch.long)
        for k in range(N_Q):  # positions outside a codebook's frames hold the mask token
            delayed[0, k, :k + 1] = MASK
            delayed[0, k, max_new_tokens + k + 1:] = MASK

        def fill(position: int) -> None:
            if position >= length:  # Zonos's last step at the length limit writes an empty slice
                return
            for k in range(N_Q):
                t = position - k - 1
                if delayed[0, k, position] == -1:
                    delayed[0, k, position] = standin_code(t, k) if t < speech_frames else (EOS if t == speech_frames else MASK)

        offset = 1
        fill(offset)  # the prefill's sample
        remaining = length - offset
        step = 0
        while remaining > 0:
            offset += 1
            fill(offset)
            self.steps += 1
            self.step_threads.add(threading.current_thread().name)
            if offset < length and delayed[0, 0, offset] == EOS:
                remaining = min(remaining, N_Q)
            remaining -= 1
            step += 1
            if callback is not None and not callback(delayed[..., offset:offset + 1], step, length - 1):
                self.stopped_early += 1
                break
        out = torch.stack([delayed[:, k, k + 1:length - N_Q + k + 1] for k in range(N_Q)], dim=1)
        return out.masked_fill(out >= 1024, 0)[..., :offset - N_Q]


def standin_make_cond_dict(text, language="en-us", speaker=None, emotion=None, pitch_std=20.0,
                           speaking_rate=15.0, unconditional_keys=(), device=None, **_):
    cond = {"espeak": ([text], [language]), "speaker": speaker, "emotion": emotion,
            "pitch_std": pitch_std, "speaking_rate": speaking_rate}
    for key in unconditional_keys:
        cond.pop(key, None)
    return cond


def expected_audio(text_length: int, frames_per_char: int = 2) -> torch.Tensor:
    """What decoding the stand-in's whole output at once gives for a text of that length."""
    n = text_length * frames_per_char
    codes = torch.tensor([[[standin_code(t, k) for t in range(n)] for k in range(N_Q)]])
    return StandInAutoencoder().decode(codes)[0, 0]
