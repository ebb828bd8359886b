"""The attention the static cache's passes run inside transformers' layers, and their masks.

The static cache (`engine.llm.static_cache`) hands each layer a 4-D additive mask over the pass's
key span and registers its own attention functions with transformers' `AttentionInterface`:
one scaled_dot_product_attention call with the grouped query heads folded into the query length,
or the same split along the keys (`engine.llm.split_attention`) with its chunks run by one kernel
(cuDNN, memory-efficient, or the CPU's). A pass names the one it runs (`attention_of`).
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F

from foresay.engine.llm.split_attention import KERNELS, merge_chunks, split_attention

_NAME = "foresay_static"


def attention_name(split_kernel: str | None) -> str:
    """The registered name of the static attention: split with `split_kernel`, or one call (None)."""
    return f"{_NAME}_split_{split_kernel}" if split_kernel else _NAME


def static_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, *,
                     kernel: str | None = None, **kwargs):
    """Attention over the pass's key span with its mask; grouped query heads fold into the query
    length (no copy of the keys and values per query head). One SDPA call, or (`kernel` given)
    split along the keys with the chunks run by `kernel`, the merge compiled into one or two
    kernels on CUDA."""
    batch, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    folded = query.reshape(batch, kv_heads, heads // kv_heads * rows, dim)
    if kernel is None:
        out = F.scaled_dot_product_attention(folded, key, value, attn_mask=attention_mask, scale=scaling)
    else:
        out = split_attention(folded, key, value, attention_mask, scaling, merge=merge_for(query.device),
                              kernel=kernel)
    return out.reshape(batch, heads, rows, dim).transpose(1, 2).contiguous(), None


_compiled_merge = None


def merge_for(device: torch.device):
    """The merge of split attention's chunks: compiled on CUDA (eagerly it is a dozen small
    kernels per layer), plain elsewhere."""
    global _compiled_merge
    if device.type != "cuda":
        return merge_chunks
    if _compiled_merge is None:
        _compiled_merge = torch.compile(merge_chunks, dynamic=False, fullgraph=True)
    return _compiled_merge


def position_mask(key_index: torch.Tensor, pos: torch.Tensor, dtype: torch.dtype, groups: int) -> torch.Tensor:
    """The additive mask [1, 1, groups * rows, len(key_index)] of a pass whose rows sit at `pos`: a
    row sees the keys up to its position. In the model's dtype, built once per pass (a boolean mask
    would be converted in every layer); its rows repeat per query head of a group, as the heads
    fold in (`static_attention`)."""
    hidden = key_index[None, :] > pos[:, None]
    bias = torch.zeros(hidden.shape, dtype=dtype, device=hidden.device)
    return bias.masked_fill_(hidden, float("-inf")).repeat(groups, 1)[None, None]


def register_attention() -> None:
    from transformers import AttentionInterface
    AttentionInterface.register(attention_name(None), static_attention)
    for kernel in {k for kernels in KERNELS.values() for k in kernels}:
        AttentionInterface.register(attention_name(kernel), partial(static_attention, kernel=kernel))


@contextmanager
def attention_of(config, name: str):
    """The model of `config` runs the attention registered as `name` inside."""
    old = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = old
