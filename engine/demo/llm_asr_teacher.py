"""The demo Whisper encoder as a teacher for a demo LLM-based recognizer's audio encoder.

Trained from scratch, the LLM-based recognizer's encoder sits on the CTC loss's all-blank plateau
for hundreds of steps, and its decoder meanwhile learns the domain's language and stops looking at
the audio. The demo Whisper pair's encoders already hear the domain's speech, and their layers have
exactly the shapes of the LLM-ASR pair's encoder layers (`SHAPES` in both trainers). So the student
starts from the teacher's transformer layers and final norm, and its own convolutional front end
(three 2-d convolutions at 10 ms hops where Whisper has two 1-d ones at 20 ms) learns to produce
what the teacher's layers expect: an auxiliary loss pulls each student output frame (80 ms) towards
the teacher's final hidden states at the same time in the clip (the mean of its two 40 ms frames).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from foresay.engine.demo import train_whisper as whisper

TEACHERS = {"demo-llm-asr": "demo-whisper", "demo-llm-asr-draft": "demo-whisper-draft"}
STUDENT_HOP_S = 0.08  # one post-convolution frame of the Qwen3-ASR encoder
CHUNK_S = 1.0  # the encoder's convolution chunk (100 mel frames at 10 ms): 13 frames each
CHUNK_FRAMES = 13
TEACHER_HOP_S = 2 * whisper.HOP_LENGTH / 16_000  # Whisper's encoder halves the 20 ms mel rate


@dataclass(frozen=True)
class TeacherStates:
    """Per training clip, the teacher encoder's final hidden states over the clip's speech
    [frames, width] (float16), and the teacher's folder."""
    states: list[torch.Tensor]
    folder: str


def load_teacher(folder: Path):
    from transformers import WhisperForConditionalGeneration

    return WhisperForConditionalGeneration.from_pretrained(folder).float().eval()


def teacher_states(folder: Path, audio: list, batch: int = 64, progress=print) -> TeacherStates:
    """Run the teacher's encoder once over every training clip (its own 20 ms features, 6 s window)."""
    teacher = load_teacher(folder)
    frames = whisper.speech_frames(audio)
    window = teacher.config.max_source_positions
    states = []
    with torch.no_grad():
        for at in range(0, len(audio), batch):
            hidden = teacher.model.encoder(whisper.features(audio[at:at + batch]).float()).last_hidden_state
            for row, n_mel in zip(hidden, frames[at:at + batch]):
                states.append(row[:min(window, (n_mel + 1) // 2 + 1)].to(torch.float16).clone())
            if at and at % (batch * 25) == 0:
                progress(f"teacher states: {at}/{len(audio)} clips")
    return TeacherStates(states, str(folder))


def copy_encoder_layers(teacher, tower) -> None:
    """The teacher encoder's transformer layers and final norm into the student's audio tower
    (Whisper's key projection has no bias: the student's starts at zero)."""
    source = teacher.model.encoder.state_dict()
    state = {k: v for k, v in source.items() if k.startswith("layers.")}
    state.update({k.replace("layer_norm.", "ln_post."): v for k, v in source.items() if k.startswith("layer_norm.")})
    missing, unexpected = tower.load_state_dict(state, strict=False)
    extra = [m for m in missing if not (m.startswith(("conv", "positional")) or m.endswith("k_proj.bias"))]
    if unexpected or extra or len(tower.layers) != teacher.config.encoder_layers:
        raise ValueError(f"teacher and student encoders differ: missing {extra}, unexpected {unexpected}")
    for layer in tower.layers:
        torch.nn.init.zeros_(layer.self_attn.k_proj.bias)


def aligned_targets(teacher: TeacherStates, batch: list[int], n_audio: list[int], shifts: list[int]) -> torch.Tensor:
    """For each student frame of the batch (packed as the encoder packs them), the teacher's
    states at the same time in the clip; `shifts` are the mel frames (10 ms) each clip was delayed."""
    rows = []
    for clip, n, shift in zip(batch, n_audio, shifts):
        states = teacher.states[clip].float()
        frame = torch.arange(n)
        time = (frame // CHUNK_FRAMES) * CHUNK_S + (frame % CHUNK_FRAMES + 0.5) * STUDENT_HOP_S - 0.01 * shift
        first = torch.floor(time / TEACHER_HOP_S - 0.5).long()
        last = len(states) - 1
        rows.append((states[first.clamp(0, last)] + states[(first + 1).clamp(0, last)]) / 2)
    return torch.cat(rows)
