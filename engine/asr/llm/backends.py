"""LLM-based recognizers (Qwen3-ASR) behind the `AsrBackend` interface of the Whisper backends.

`LlmGreedyBackend` is the reference (Foresay's greedy loop on one model); `LlmSpecAsrBackend`
gives the same tokens with a smaller sibling drafting (Qwen3-ASR 0.6B for 1.7B): each model
encodes the window once, prefills its own decoder cache with its audio embeddings and the
prompt, and SpecASR (specasr.py, the same code as for Whisper) runs over the two cursors.
Forced (committed) tokens follow `<asr_text>`; the prompt (earlier text) and the configured
context go into the system turn, which Qwen3-ASR reads as context.
"""
from __future__ import annotations

from typing import Sequence

import torch

from foresay.engine.asr.backends import AsrBackend, DecodeLimits, Hypothesis, WhisperText
from foresay.engine.asr.greedy import greedy_loop
from foresay.engine.asr.llm.models import LoadedLlmAsr, encode_both
from foresay.engine.asr.specasr import SpecConfig, speculative_loop


class _LlmBackend(AsrBackend):
    def __init__(self, target: LoadedLlmAsr, limits: DecodeLimits, context: str) -> None:
        self.target, self.limits = target, limits
        self.window_seconds = target.window_seconds
        # Byte-level BPE like Whisper's: a token that begins with a space begins a word.
        self.text = WhisperText(target.tokenizer, target.layout.first_special)
        self.context = self.text.encode(context) if context.strip() else []

    def _prompt(self, prompt: Sequence[int]) -> list[int]:
        return [*self.context, *prompt]


class LlmGreedyBackend(_LlmBackend):
    def __init__(self, target: LoadedLlmAsr, limits: DecodeLimits = DecodeLimits(), context: str = "") -> None:
        super().__init__(target, limits, context)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        cursor = self.target.cursor(self.target.encode(audio), self._prompt(prompt))
        layout = self.target.layout
        result = greedy_loop(cursor, layout.decoder_prefix(forced), self.target.rules, layout.end,
                             self.limits.max_new_tokens)
        return Hypothesis(result.tokens, result.stats)


class LlmSpecAsrBackend(_LlmBackend):
    """Target greedy output, drafted by a smaller model of the same vocabulary and prompt."""

    def __init__(self, target: LoadedLlmAsr, draft: LoadedLlmAsr, config: SpecConfig = SpecConfig(),
                 limits: DecodeLimits = DecodeLimits(), context: str = "") -> None:
        target.layout.check_same(draft.layout)
        super().__init__(target, limits, context)
        self.draft, self.config = draft, config
        self.window_seconds = min(target.window_seconds, draft.window_seconds)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        prompt = self._prompt(prompt)
        with torch.inference_mode():
            target_embeds, draft_embeds = encode_both(self.target, self.draft, audio)
            drafter = self.draft.cursor(draft_embeds, prompt, draft=True)
            verifier = self.target.cursor(target_embeds, prompt)
        layout = self.target.layout
        result = speculative_loop(verifier, drafter, layout.decoder_prefix(forced), self.target.rules, layout.end,
                                  self.config, self.limits.max_new_tokens, recycled=guess)
        return Hypothesis(result.tokens, result.stats)
