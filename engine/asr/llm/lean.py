"""A lean forward pass of a Qwen3 decoder stack (Qwen3-ASR's decoder) for `LlmCursor`.

At the demo pair's widths (96 and 192) a decoder pass is almost all framework work: module
calls, config look-ups, mask building, rotary tables recomputed per pass, output containers.
`LeanQwen3` runs the same tensor operations as transformers' `Qwen3Model` with SDPA attention,
in the same order and with the same SDPA dispatch (grouped-query flag, packed single query,
repeated keys with a mask), on the same `DynamicCache`, so the hidden states and the cache are
bit-identical to the library's (tests/test_asr_llm_lean.py checks every pass kind the cursors
use). The one table it keeps, cos/sin of the first positions, is computed with the library's
formula for all of them at once, and checked bit-identical to the per-pass computation when built
(where it is not, every pass computes its own). `FastDraftQwen3` (below) is a looser, faster
pass for drafts only.

Only the configuration it reproduces is taken (plain Qwen3 layers, default rotary, SDPA, the
library's default SDPA dispatch) on CPU, where the bit-identity is tested; any other model or
device (CUDA: not checked yet, no GPU was at hand) keeps the library's forward (`for_model`
returns None).
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache

TABLE_POSITIONS = 4096  # rotary rows kept (a 30 s window and its prompt need under 1000); beyond, computed per pass


def _causal_after_cache(mask: torch.Tensor | None, n: int, past: int, device) -> torch.Tensor | None:
    """`mask`, or for a chain of `n` after `past` cached entries the library's boolean causal mask
    (SDPA's own causal flag covers a chain on an empty cache)."""
    if mask is not None or n == 1 or not past:
        return mask
    kv = torch.arange(past + n, device=device)
    return (kv[None, :] <= kv[past:, None])[None, None]


class _Layer:
    def __init__(self, layer) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        self.input_norm, self.post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.q, self.k, self.v, self.o = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight,
                                          attn.o_proj.weight)
        self.q_norm, self.k_norm = attn.q_norm.weight, attn.k_norm.weight
        self.gate, self.up, self.down = mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight


class LeanQwen3:
    """The decoder stack of one Qwen3 model (`language_model`), run without module overhead."""

    def __init__(self, language_model) -> None:
        config = language_model.config
        self.embed = language_model.embed_tokens.weight
        self.layers = [_Layer(layer) for layer in language_model.layers[: config.num_hidden_layers]]
        self.norm = language_model.norm.weight
        self.eps = float(config.rms_norm_eps)
        self.head_dim = language_model.layers[0].self_attn.head_dim
        self.scaling = language_model.layers[0].self_attn.scaling
        self.groups = config.num_attention_heads // config.num_key_value_heads
        self.dtype = self.embed.dtype
        self.rotary = language_model.rotary_emb
        self.probe = torch.empty(0, dtype=self.dtype, device=self.embed.device)
        positions = torch.arange(min(config.max_position_embeddings, TABLE_POSITIONS), device=self.embed.device)[None]
        with torch.inference_mode():
            cos, sin = self.rotary(self.probe, positions)  # the library's own formula, all positions at once
            for span in (positions[:, :1], positions[:, 3:40], positions[:, -7:]):  # as a pass computes them
                c, s = self.rotary(self.probe, span)
                if not (torch.equal(c, cos[:, span[0]]) and torch.equal(s, sin[:, span[0]])):
                    cos, sin = cos[:, :0], sin[:, :0]  # not the same bits here: every pass computes its own
                    break
        self.cos, self.sin = cos[0], sin[0]

    @classmethod
    def for_model(cls, language_model) -> "LeanQwen3 | None":
        """This forward of `language_model`, built once and kept on it; None where it would not
        reproduce the library's pass (another architecture, attention or rotary)."""
        config = language_model.config
        rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
        supported = (type(language_model).__name__ == "Qwen3Model" and config._attn_implementation == "sdpa"
                     and rope == "default" and not config.attention_bias and config.hidden_act == "silu"
                     and "sliding_attention" not in (getattr(config, "layer_types", None) or ())
                     and os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA", "0") != "1"  # the library's dispatch
                     and language_model.embed_tokens.weight.device.type == "cpu")  # checked on CPU only
        if not supported:
            return None
        key = f"_foresay_{cls.__name__}"
        lean = language_model.__dict__.get(key)
        if lean is None or not lean.current():
            lean = cls(language_model)
            language_model.__dict__[key] = lean
        return lean

    def current(self) -> bool:
        """Whether this forward still computes the model's pass (it reads the weights themselves)."""
        return True

    def _cos_sin(self, positions: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary cos and sin [n, head_dim] of `positions` (largest `top`)."""
        if top < len(self.cos):
            return self.cos[positions], self.sin[positions]
        cos, sin = self.rotary(self.probe, positions[None])
        return cos[0], sin[0]

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * h.to(x.dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def forward(self, cache: DynamicCache, positions: torch.Tensor, top: int, *, ids: torch.Tensor | None = None,
                embeds: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states [1, n, hidden] after the final norm of `ids` [1, n] (or `embeds` [1, n, hidden])
        at `positions` [n] (on the model's device; `top` is their largest), appended to `cache`.
        `mask`: None (causal after the cache) or additive [1, 1, n, cache + n]."""
        hidden = F.embedding(ids, self.embed) if embeds is None else embeds
        n = hidden.shape[1]
        past = cache.get_seq_length()
        cos, sin = (t[None, None] for t in self._cos_sin(positions, top))
        mask = _causal_after_cache(mask, n, past, hidden.device)
        shape = (1, n, -1, self.head_dim)
        for index, layer in enumerate(self.layers):
            residual = hidden
            x = self._rms(hidden, layer.input_norm)
            q = self._rms(F.linear(x, layer.q).view(shape), layer.q_norm).transpose(1, 2)
            k = self._rms(F.linear(x, layer.k).view(shape), layer.k_norm).transpose(1, 2)
            v = F.linear(x, layer.v).view(shape).transpose(1, 2)
            q = (q * cos) + (self._rotate_half(q) * sin)
            k = (k * cos) + (self._rotate_half(k) * sin)
            k, v = cache.update(k, v, index)
            hidden = residual + F.linear(self._attend(q, k, v, mask, n), layer.o)
            residual = hidden
            x = self._rms(hidden, layer.post_norm)
            hidden = residual + F.linear(F.silu(F.linear(x, layer.gate)) * F.linear(x, layer.up), layer.down)
        return self._rms(hidden, self.norm)

    def _attend(self, q, k, v, mask, n) -> torch.Tensor:
        """transformers' `sdpa_attention_forward` for these inputs, branch for branch."""
        causal, gqa, packed = mask is None and n > 1, False, False
        if self.groups > 1:
            if mask is None:
                gqa = True
            elif n == 1:
                q, packed = q.reshape(1, q.shape[1] // self.groups, self.groups, q.shape[-1]), True
            else:
                k = k[:, :, None].expand(1, k.shape[1], self.groups, *k.shape[2:]).reshape(1, -1, *k.shape[2:])
                v = v[:, :, None].expand(1, v.shape[1], self.groups, *v.shape[2:]).reshape(1, -1, *v.shape[2:])
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling,
                                             is_causal=causal, enable_gqa=gqa)
        if packed:
            out = out.reshape(1, -1, n, v.shape[-1])
        return out.transpose(1, 2).contiguous().reshape(1, n, -1)


class FastDraftQwen3(LeanQwen3):
    """A draft's decoder pass in fewer operations: one projection for queries, keys and values,
    one for the gate and up projections, one norm and one rotation over the queries and keys
    together, grouped-query SDPA throughout. The same function up to rounding, not bit for bit
    (the library's pass is not this one), so it runs drafts only: the target's verification
    decides every token, so the output cannot change (demo draft pass 0.27 -> 0.20 ms)."""

    def __init__(self, language_model) -> None:
        super().__init__(language_model)
        config = language_model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        for layer in self.layers:
            layer.qkv = torch.cat([layer.q, layer.k, layer.v])
            layer.gate_up = torch.cat([layer.gate, layer.up])
            layer.qk_norm = torch.cat([layer.q_norm.expand(self.heads, -1), layer.k_norm.expand(self.kv_heads, -1)])
        self.signed_sin = self._signed(self.sin)
        self._sources = [t for layer in self.layers for t in (layer.q, layer.k, layer.v, layer.gate, layer.up,
                                                              layer.q_norm, layer.k_norm)]
        self._stamp = self._versions()

    def _versions(self) -> tuple[int, ...]:
        return tuple(t._version for t in self._sources)

    def current(self) -> bool:
        """The fused weights are copies: weights changed in place since (training) make it stale."""
        return self._versions() == self._stamp

    def _signed(self, sin: torch.Tensor) -> torch.Tensor:
        """sin with its first half negated: rotate_half(x) * sin == x.roll(half) * signed sin."""
        half = self.head_dim // 2
        return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)

    def forward(self, cache: DynamicCache, positions: torch.Tensor, top: int, *, ids: torch.Tensor | None = None,
                embeds: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = F.embedding(ids, self.embed) if embeds is None else embeds
        n, width, head = hidden.shape[1], hidden.shape[-1], self.head_dim
        past = cache.get_seq_length()
        if top < len(self.cos):
            cos, sin = self.cos[positions], self.signed_sin[positions]
        else:
            cos, sin = self._cos_sin(positions, top)
            sin = self._signed(sin)
        cos, sin = cos[None, :, None], sin[None, :, None]
        mask = _causal_after_cache(mask, n, past, hidden.device)
        rotated = self.heads + self.kv_heads
        for index, layer in enumerate(self.layers):
            x = F.rms_norm(hidden, (width,), layer.input_norm, self.eps)
            qkv = F.linear(x, layer.qkv).view(1, n, rotated + self.kv_heads, head)
            qk = F.rms_norm(qkv[:, :, :rotated], (head,), None, self.eps) * layer.qk_norm
            qk = qk * cos + qk.roll(head // 2, -1) * sin
            k, v = cache.update(qk[:, :, self.heads:].transpose(1, 2), qkv[:, :, rotated:].transpose(1, 2), index)
            out = F.scaled_dot_product_attention(qk[:, :, :self.heads].transpose(1, 2), k, v, attn_mask=mask,
                                                 scale=self.scaling, is_causal=mask is None and n > 1, enable_gqa=True)
            hidden = hidden + F.linear(out.transpose(1, 2).reshape(1, n, -1), layer.o)
            gate_up = F.linear(F.rms_norm(hidden, (width,), layer.post_norm, self.eps), layer.gate_up)
            gate, up = gate_up.chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer.down)
        return F.rms_norm(hidden, (width,), self.norm, self.eps)
