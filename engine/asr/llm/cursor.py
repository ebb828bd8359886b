"""The decoder of an LLM-based recognizer (audio encoder + causal LM) as a `CacheCursor`.

The audio embeddings and the prompt around them (chat header, context text, language tag) are
prefilled into the decoder's own key/value cache once per decode, as `context_length` entries
every later token attends to; the transcript is then decoded after it exactly as a Whisper
decoder is (greedy.py, specasr.py). Sequence position i runs at rotary position
`context_length + i`, given explicitly, so tree nodes take the positions of their depth.

Qwen3-ASR's original checkpoints use multimodal rotary positions (M-RoPE, sections for time,
height, width); with audio and text only, all three components of every position are equal,
which is plain 1-D rotary embedding: transformers' port runs a plain Qwen3 decoder and so does
this cursor. A model whose M-RoPE components differ (images, video) would need 3-row positions.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache

from foresay.engine.asr.cursor import CacheCursor
from foresay.engine.asr.llm.lean import FastDraftQwen3, LeanQwen3


class LlmCursor(CacheCursor):
    """`model` has `model.language_model` (the decoder stack), `model.get_input_embeddings()`,
    `lm_head`, `config.text_config`, `dtype` and `device` (a Qwen3ASRForConditionalGeneration)."""

    def __init__(self, model, context: torch.Tensor, draft: bool = False) -> None:
        """A `draft` cursor's passes need not give the library's bits (the target decides every
        token): the context joins the first chain pass instead of a pass of its own (one pass
        fewer), and passes run `FastDraftQwen3`. Other cursors run `LeanQwen3`, the library's pass
        bit for bit without its per-pass overhead (llm_lean.py)."""
        super().__init__(model, DynamicCache())
        self.device = model.device  # read once: a module's device property walks its parameters
        self.lean = (FastDraftQwen3 if draft else LeanQwen3).for_model(model.model.language_model)
        self._deferred: torch.Tensor | None = None
        if draft:
            self._deferred, self.context_length = context, int(context.shape[0])
        else:
            self._prefill(context)

    @property
    def max_positions(self) -> int:
        return int(self.model.config.text_config.max_position_embeddings) - self.context_length

    def _cache_layers(self):
        return self.cache.layers

    @torch.inference_mode()
    def _prefill(self, context: torch.Tensor, tokens: Sequence[int] = ()) -> torch.Tensor:
        """Run the context embeddings [n, hidden] into the cache (one decoder pass), followed by
        `tokens` when given (a causal chain after it); the hidden states of `tokens`."""
        n = int(context.shape[0])
        device = self.device
        embeds = context[None].to(device, self.model.dtype)
        if tokens:
            ids = torch.tensor([list(tokens)], device=device)
            embeds = torch.cat([embeds, self.model.model.language_model.embed_tokens(ids)], dim=1)
        hidden = self._decoder(torch.arange(embeds.shape[1], device=device), embeds.shape[1] - 1, embeds=embeds)
        self.context_length = n
        self.passes += 1
        return hidden[:, n:]

    @torch.inference_mode()
    def _forward(self, tokens: Sequence[int], positions: torch.Tensor, attention_mask) -> torch.Tensor:
        top = self._check_room(tokens, positions) + self.context_length
        if self._deferred is not None:
            context, self._deferred = self._deferred, None
            if attention_mask is None:  # a chain after the empty cache: one causal pass with the context
                return self.model.lm_head(self._prefill(context, tokens))[0].float()
            self._prefill(context)
        device = self.device
        hidden = self._decoder((positions + self.context_length).to(device), top,
                               ids=torch.tensor([list(tokens)], device=device),
                               mask=None if attention_mask is None else attention_mask.to(device))
        self.passes += 1
        return self.model.lm_head(hidden)[0].float()

    def _decoder(self, positions: torch.Tensor, top: int, *, ids: torch.Tensor | None = None,
                 embeds: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """One pass of the decoder stack over `ids` or `embeds` at `positions` (largest `top`),
        into the cache: the lean forward where there is one, the library's otherwise."""
        if self.lean is not None:
            return self.lean.forward(self.cache, positions, top, ids=ids, embeds=embeds, mask=mask)
        return self.model.model.language_model(input_ids=ids, inputs_embeds=embeds, position_ids=positions[None],
                                               attention_mask=mask, past_key_values=self.cache,
                                               use_cache=True).last_hidden_state
