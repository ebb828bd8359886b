"""Captured decoder passes of an LLM-based recognizer (Qwen3-ASR): static buffers, one pass shape.

`CapturedLlmDecoder` gives the target's decoder what `engine/asr/captured.py` gives a Whisper's:
key/value buffers of a fixed length, every transcript pass padded to one row count and masked over
the whole buffer, each such shape a CUDA graph on a GPU. The window's context (audio embeddings
and prompt) is prefilled into the first slots of the buffers by one pass of its own length, the
same for the greedy reference and for SpecASR; every later pass has the same shape whatever it
holds (one token or a draft tree), so a position's logits do not depend on how many tokens shared
its pass, and SpecASR gives greedy decoding's transcript bit for bit on any device. With the
dynamic cache a multi-token verification and a one-token step round bf16 differently.
`LoadedLlmAsr.cursor` gives a `StaticCursor` over it when the model has one (`attach`) and the
context fits; drafts keep their dynamic cursor (the target decides every token).
"""
from __future__ import annotations

import torch

from foresay.engine.asr.captured import EXACT_ROWS, PassShape, SlotCache, StaticPasses
from foresay.engine.asr.errors import AsrError

CONTEXT_POSITIONS = 1024  # audio embeddings and prompt: a 30 s window gives 390 audio positions
TEXT_POSITIONS = 448      # transcript tokens after the context, as a Whisper decoder holds


class CapturedLlmDecoder(StaticPasses):
    """The decoder stack and head of one Qwen3-ASR model (`model.model.language_model`,
    `model.lm_head`) over static buffers."""

    def __init__(self, model, rows: tuple[int, ...] = EXACT_ROWS, context_positions: int = CONTEXT_POSITIONS,
                 text_positions: int = TEXT_POSITIONS):
        config = model.config.text_config
        room = int(config.max_position_embeddings)
        self.context_positions = min(context_positions, room - max(rows))
        self.max_positions = min(text_positions, room - self.context_positions)
        super().__init__(model, rows, self.context_positions + self.max_positions)
        attention = model.model.language_model.layers[0].self_attn
        shape = (1, config.num_key_value_heads, self.length, attention.head_dim)
        with torch.inference_mode():
            self.self_cache = SlotCache(config.num_hidden_layers, shape, self.dtype, self.device)
            self.shapes = {r: PassShape(self, r) for r in self.rows}

    def fits(self, context: torch.Tensor) -> bool:
        return int(context.shape[0]) <= self.context_positions

    @torch.inference_mode()
    def load(self, context: torch.Tensor) -> None:
        """Prefill the context embeddings [n, hidden] into slots 0..n-1 (one causal pass)."""
        if self.loaded is context:
            return
        n = int(context.shape[0])
        if not self.fits(context):
            raise AsrError(f"a context of {n} positions; the captured decoder holds {self.context_positions}")
        slots = torch.arange(n, device=self.device)
        allowed = torch.zeros((n, self.length), dtype=torch.bool)
        allowed[:, :n] = torch.ones((n, n), dtype=torch.bool).tril()
        bias = torch.zeros((n, self.length), dtype=self.dtype).masked_fill(~allowed, torch.finfo(self.dtype).min)
        self.self_cache.write_at = slots
        self.model.model.language_model(
            inputs_embeds=context[None].to(self.device, self.dtype), position_ids=slots[None],
            attention_mask=bias[None, None].to(self.device), past_key_values=self.self_cache, use_cache=True)
        self.slot_offset = n
        self.loaded = context

    def _forward(self, shape: PassShape) -> torch.Tensor:
        self.self_cache.write_at = shape.slots
        hidden = self.model.model.language_model(
            input_ids=shape.ids, position_ids=shape.positions, attention_mask=shape.mask,
            past_key_values=self.self_cache, use_cache=True).last_hidden_state
        return self.model.lm_head(hidden)[0]


def attach(model, rows: tuple[int, ...] = EXACT_ROWS) -> CapturedLlmDecoder:
    """Give `model` a captured decoder, which `LoadedLlmAsr.cursor` then uses for the target."""
    captured = CapturedLlmDecoder(model, rows)
    model.foresay_captured = captured
    return captured
