"""Zonos's transformer decode step at static shapes, captured as one CUDA graph.

Zonos v0.1 generates one codec frame per decode step, and its transformer backbone runs that step
eagerly: about 1900 PyTorch operations (26 layers of norms, rotary embeddings and their reshapes,
cache writes, attention, MLPs), whose launches, not the GPU's arithmetic, decide the step's time
(48 ms on an H200, where reading the weights takes under 1 ms). Zonos captures its own step only
for the hybrid backbone; `CapturedZonosStep` does it for the transformer:

- the keys and values live in buffers Foresay owns, allocated once (zeroed, grown when a longer
  generation needs more positions) instead of a new cache per generation;
- a step writes its key and value at the position held in a device tensor and attends over the
  whole buffer through a mask of the filled positions, so every step has the same shapes and
  addresses and replays one graph (`engine.llm.cuda_graphs`; eager off CUDA);
- the model then says it uses CUDA graphs, so `Zonos.generate` does not compile the step and
  the engine keeps the model for one generation at a time (the buffers belong to it).

What this relies on in `Zonos.generate`: it asks `setup_cache(batch_size=2, max_seqlen=N)` for
its cache, prefills through the backbone with it, calls `_decode_one_token(input_ids, params,
cfg_scale, allow_cudagraphs=...)` for each frame with `params.seqlen_offset` positions filled, and
may add to the returned logits in place. A cache that is not this object's is decoded by Zonos's
own step.
"""
from __future__ import annotations

from types import MethodType

import torch
import torch.nn.functional as F

from foresay.engine.llm.cuda_graphs import graph_pool, make_pass

GROW_POSITIONS = 512  # buffers grow in steps of this many positions
ROTARY_POSITIONS = 16384  # as many rotary positions as Zonos precomputes
AUDIO_TOKENS = 1025  # codes 0..1023, end of speech; the rest of a head's outputs is padding


def is_transformer_backbone(model) -> bool:
    """Zonos's pure-PyTorch transformer backbone (the layout the static step reads)."""
    layers = getattr(getattr(model, "backbone", None), "layers", None)
    return bool(layers) and all(
        hasattr(layer, "mixer") and hasattr(layer.mixer, "in_proj") and hasattr(layer, "mlp") for layer in layers)


def rotary_table(positions: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(positions, head_dim / 2, 2): cosine and sine of each position's angle per channel pair."""
    inverse = 1.0 / (base ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(positions).float(), inverse)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)


def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent channel pair of `x` (batch, rows, heads, head_dim) by its position's
    angle; `table` is (batch, rows, head_dim / 2, 2). Computed in float32, returned in x's dtype."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    cos_sin = table.view(-1, pairs.size(1), 1, pairs.size(3), 2)
    cos, sin = cos_sin[..., 0], cos_sin[..., 1]
    rotated = torch.stack([pairs[..., 0] * cos - pairs[..., 1] * sin,
                           pairs[..., 1] * cos + pairs[..., 0] * sin], dim=-1)
    return rotated.flatten(3).type_as(x)


class CapturedZonosStep:
    """The static decode step of one loaded Zonos transformer; `install` hands it to the model."""

    def __init__(self, model, capture: bool = True) -> None:
        if not is_transformer_backbone(model):
            raise ValueError("the captured step needs Zonos's transformer backbone")
        self.model = model
        self.capture = capture
        self.device = model.device
        backbone = model.backbone
        attention = backbone.layers[0].mixer
        self.heads, self.kv_heads, self.head_dim = attention.num_heads, attention.num_heads_kv, attention.head_dim
        self.rotary = rotary_table(ROTARY_POSITIONS, self.head_dim).to(self.device)
        self.buffers: dict[int, tuple[torch.Tensor, None]] = {}
        self.capacity = 0
        self.dtype: torch.dtype | None = None
        self.position = torch.zeros(1, dtype=torch.long, device=self.device)
        self.input_ids = torch.zeros(1, model.autoencoder.num_codebooks, 1, dtype=torch.long, device=self.device)
        self._pass = None
        self._cfg_scale: float | None = None
        self._zonos_setup_cache = model.setup_cache
        self._zonos_decode = model._decode_one_token
        # graphs recorded (eager passes off CUDA): grown buffers or a new guidance scale build anew
        self.passes_built = 0

    def install(self) -> "CapturedZonosStep":
        """Route the model's generation through this step (instance attributes shadow its methods)."""
        self.model.setup_cache = self.setup_cache
        self.model._decode_one_token = self.decode_one_token
        self.model.can_use_cudagraphs = MethodType(lambda model: True, self.model)
        return self

    def setup_cache(self, batch_size: int, max_seqlen: int, dtype: torch.dtype = torch.bfloat16):
        """Zonos's `setup_cache`, on the owned buffers (zeroed on allocation: a masked key must
        still be finite, or attention's sum turns NaN)."""
        from zonos.config import InferenceParams

        if batch_size != 2:  # one segment with guidance; anything else takes Zonos's own path
            return self._zonos_setup_cache(batch_size, max_seqlen, dtype)
        if max_seqlen > self.capacity or dtype != self.dtype:
            capacity = -(-max_seqlen // GROW_POSITIONS) * GROW_POSITIONS
            if capacity > ROTARY_POSITIONS:
                return self._zonos_setup_cache(batch_size, max_seqlen, dtype)
            self._allocate(capacity, dtype)
        self.model.backbone.freqs_cis = self.rotary  # Zonos's prefill reads its rotary table here
        lengths = torch.zeros(batch_size, dtype=torch.int32, device=self.device)
        return InferenceParams(self.capacity, batch_size, 0, 0, self.buffers, lengths)

    def _allocate(self, capacity: int, dtype: torch.dtype) -> None:
        self._pass = None
        self.buffers = {}
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        shape = (2, capacity, 2, self.kv_heads, self.head_dim)
        self.buffers = {i: (torch.zeros(shape, dtype=dtype, device=self.device), None)
                        for i in range(len(self.model.backbone.layers))}
        self.capacity, self.dtype = capacity, dtype
        self.key_positions = torch.arange(capacity, device=self.device)

    def decode_one_token(self, input_ids: torch.Tensor, inference_params, cfg_scale, allow_cudagraphs: bool = True):
        """Zonos's `_decode_one_token`: guided logits (1, codebooks, 1025) of the next frame."""
        if inference_params.key_value_memory_dict is not self.buffers or input_ids.shape != self.input_ids.shape:
            return self._zonos_decode(input_ids, inference_params, cfg_scale, allow_cudagraphs=False)
        self.input_ids.copy_(input_ids)
        self.position.fill_(inference_params.seqlen_offset)
        scale = float(cfg_scale)
        if self._pass is None or scale != self._cfg_scale:
            self._cfg_scale = scale
            self._pass = None  # the old graph goes before the next is recorded, in a pool of its own
            self._pass = make_pass(self._step, self.device, graph_pool(self.device), capture=self.capture)
            self.passes_built += 1
        return self._pass()

    def _step(self) -> torch.Tensor:
        """One frame for the guided pair (conditioned, unconditioned) at `self.position`."""
        model, backbone = self.model, self.model.backbone
        hidden = model.embed_codes(self.input_ids).repeat(2, 1, 1)
        table = self.rotary.index_select(0, self.position).unsqueeze(0).expand(2, -1, -1, -1)
        visible = (self.key_positions <= self.position).view(1, 1, 1, -1)
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        group = self.heads // self.kv_heads
        for index, layer in enumerate(backbone.layers):
            attention = layer.mixer
            q, k, v = attention.in_proj(layer.norm(hidden)).split([q_size, kv_size, kv_size], dim=-1)
            q = rotate(q.view(2, 1, self.heads, self.head_dim), table)
            k = rotate(k.view(2, 1, self.kv_heads, self.head_dim), table)
            v = v.view(2, 1, self.kv_heads, self.head_dim)
            cache = self.buffers[index][0]
            cache.index_copy_(1, self.position, torch.stack([k, v], dim=2))
            keys, values = cache.unbind(dim=2)
            # query head h reads key head h // group (as enable_gqa does): one row's heads folded
            # into rows per key head, so no kernel expands the keys to every query head
            mixed = F.scaled_dot_product_attention(q.view(2, self.kv_heads, group, self.head_dim),
                                                   keys.transpose(1, 2), values.transpose(1, 2), attn_mask=visible)
            hidden = hidden + attention.out_proj(mixed.reshape(2, 1, q_size))
            hidden = hidden + layer.mlp(layer.norm2(hidden))
        logits = model.apply_heads(backbone.norm_f(hidden)).squeeze(2).float()
        conditioned, unconditioned = logits.chunk(2)
        logits = unconditioned + (conditioned - unconditioned) * self._cfg_scale
        logits[..., AUDIO_TOKENS:] = -torch.inf
        return logits
