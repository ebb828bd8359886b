"""The chat model's decoder run one layer at a time over the conversation's KV cache.

Early-exit drafting (SpecBound) runs a token through only the first layers, and later finishes it
and other tokens together through the rest. So every layer's cache may, for a while, hold a
different number of positions: a layer holds position p once p has been run through it, and a
deeper layer never holds more positions than a shallower one. `LayerwiseModel` runs a block of
consecutive positions through one layer, at the positions that layer's cache expects next.

Supported: decoder-only models whose body is `model.model` with `embed_tokens`, `layers`, `norm`
and `rotary_emb` and full attention in every layer (Qwen2, Qwen3, Llama), with the dynamic cache
(`engine.llm.dynamic_cache.KVCache`) and sdpa or eager attention.
"""
from __future__ import annotations

import torch

from foresay.engine.errors import ForesayError

ARCHITECTURES = ("qwen2", "qwen3", "llama")
ATTENTION = ("sdpa", "eager")


def decoder_layout_unsupported(model) -> str | None:
    """Why a transformers model's decoder cannot be run layer by layer here (None: it can): the
    layout is `model.model` with embed_tokens / layers / norm / rotary_emb, full attention in
    every layer. Shared by SpecBound and Speculative Streaming (`stream_model`)."""
    body = getattr(model, "model", None)
    if not all(hasattr(body, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return "the model's body has no embed_tokens / layers / norm / rotary_emb"
    config = model.config
    types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in types) or (
            not types and getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", False)):
        return "the model has sliding-window layers"
    return None


def layerwise_unsupported(lm) -> str | None:
    """Why layer-by-layer runs cannot work on this model (None: they can)."""
    model = getattr(lm, "model", None)
    if model is None or not hasattr(model, "get_output_embeddings"):
        return "its layers are not in this process (a server backend?)"
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", "?")
    if kind not in ARCHITECTURES:
        return f"architecture {kind!r} is not one of {', '.join(ARCHITECTURES)}"
    why = decoder_layout_unsupported(model)
    if why:
        return why
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ATTENTION:
        return f"attention implementation {attention!r} is not one of {', '.join(ATTENTION)}"
    return None


class LayerwiseModel:
    """Embed, run one layer, read logits: the pieces of one forward pass, apart."""

    def __init__(self, lm):
        why = layerwise_unsupported(lm)
        if why:
            raise ForesayError(f"SpecBound cannot run {getattr(lm, 'name', 'this model')}: {why}")
        self.lm = lm
        body = lm.model.model
        self.body = body
        self.layers = list(body.layers)
        self.n_layers = len(self.layers)
        self.lm_head = lm.model.get_output_embeddings()
        self.eager = lm.model.config._attn_implementation == "eager"
        self.device = lm.device

    @staticmethod
    def cache_layers(cache) -> list:
        """The per-layer caches behind a `KVCache`; refuses caches it cannot cut layer by layer."""
        inner = getattr(cache, "_cache", None)
        layers = getattr(inner, "layers", None)
        if not layers or not getattr(cache, "_croppable", False) \
                or any(not hasattr(layer, "crop") or getattr(layer, "is_sliding", False) for layer in layers):
            raise ForesayError("SpecBound needs the dynamic KV cache with plain attention layers "
                               "(llm.cache = \"dynamic\")")
        return layers

    def embed(self, ids: list[int]) -> torch.Tensor:
        return self.body.embed_tokens(torch.tensor([ids], dtype=torch.long, device=self.device))

    def rotary(self, start: int, count: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Positions start .. start+count-1 and their rotary embeddings (cos, sin), to slice."""
        positions = torch.arange(start, start + count, device=self.device).unsqueeze(0)
        cos, sin = self.body.rotary_emb(self.body.embed_tokens.weight[:1][None], positions)
        return positions, cos, sin

    def run_layer(self, cache, index: int, hidden: torch.Tensor, start: int, rotary=None) -> torch.Tensor:
        """Run `hidden` (1, q, H), the inputs of positions start .. start+q-1, through layer
        `index`; that layer's cache must hold exactly `start` positions. `rotary`: (first position,
        positions, cos, sin) from `rotary()` covering these positions (None: computed here)."""
        held = cache._cache.layers[index].get_seq_length()
        if held != start:
            raise ForesayError(f"layer {index} holds {held} positions, not the {start} its input follows")
        q = hidden.shape[1]
        if rotary is None:
            rotary = (start, *self.rotary(start, q))
        first, positions, cos, sin = rotary
        at = slice(start - first, start - first + q)
        positions, rotary = positions[:, at], (cos[:, at], sin[:, at])
        return self.layers[index](hidden, attention_mask=self._mask(start, q, hidden.dtype),
                                  position_embeddings=rotary, position_ids=positions,
                                  past_key_values=cache._cache, use_cache=True)

    def _mask(self, start: int, q: int, dtype: torch.dtype) -> torch.Tensor | None:
        """Causal mask of q new positions after `start` cached ones (one new position sees all)."""
        if q == 1:
            return None
        rows = torch.arange(q, device=self.device).unsqueeze(1) + start
        allowed = torch.arange(start + q, device=self.device).unsqueeze(0) <= rows
        if not self.eager:
            return allowed[None, None]
        return torch.zeros(allowed.shape, dtype=dtype, device=self.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)[None, None]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The model's own next-token logits (float32) of final-layer states (1, q, H) -> (q, V)."""
        return self.lm_head(self.body.norm(hidden))[0].float()

