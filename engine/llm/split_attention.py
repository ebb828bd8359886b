"""Attention split along the keys: the exact-mode pass's attention as many small ones, merged.

An exact-mode pass on a GPU holds 64 rows; with a model's query heads folded per key head
(`static_attention.static_attention`) that is a few hundred query rows per key head, a handful of
query tiles for a fused attention kernel. Each tile walks the whole key span alone, so a few of
the GPU's processors work while the rest wait, and the step's attention grows with the span
(measured on an H200: 0.85 ms over 1024 keys, 5.8 ms over 8192, for a pass whose keys and values
take 0.11 ms to read). Here the span is cut into chunks of `CHUNK` keys, each chunk's attention
runs as its own head of one batched call (a tile per chunk and query block, enough to fill the
GPU), and the chunks' results merge by their log-sum-exp: the output is a weighted mean of the
chunks' outputs, each weighed by the share of the softmax's mass its keys hold. On CUDA the chunks
run through cuDNN's fused attention where it reports what the merge needs, else through PyTorch's
memory-efficient kernel (`KERNELS`; the warm-up picks).

Exactness: the chunk size is fixed, so a position's keys fall into the same chunks whatever the
pass's span; a chunk wholly past a row's position is masked and weighs exactly zero, and adding
zeros does not change a sum; so a longer span only appends zero terms to the merge, whose sums
run as a fixed tree (halves added pairwise, the chunks padded with zeros to a power of two) that
such terms cannot regroup (a compiled reduction did regroup them on an H200). Whether the
device's kernels keep that promise bit for bit is measured at warm-up, like every span
(`StaticEngine.probe_spans`), and the split is checked against one plain attention call first
(`split_agrees`). On the H200 the step's attention fell to 0.31 ms over 1024 keys and 1.05 ms
over 8192.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 256  # keys per chunk; key spans and the KV buffer are multiples of it
AGREEMENT_ATOL = 3e-2  # bfloat16 rounding of unit-scale outputs, far below a wrong merge's error
KERNELS = {"cuda": ("cudnn", "efficient"), "cpu": ("cpu",)}  # per device, in the order tried


def kernels_for(device_type: str) -> tuple[str, ...]:
    """The chunk kernels of a device type, in the order tried (a device without its own: the CPU's)."""
    return KERNELS.get(device_type, KERNELS["cpu"])


def chunk_outputs(query, key, value, bias, scale, kernel):
    """Attention of `query` [kvh, chunks, rows, dim] over each chunk of `key`/`value` [kvh,
    chunks, CHUNK, dim] with the additive `bias` [kvh, chunks, rows, CHUNK], by `kernel` (one of
    `KERNELS`): the chunks' outputs (the query's dtype) and their log-sum-exp [kvh, chunks, rows]
    (float32; natural where the kernel keeps its promise, which `split_agrees` checks)."""
    if kernel == "cudnn":
        out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(
            query, key, value, bias, True, 0.0, False, False, scale=scale)[:2]
    elif kernel == "efficient":
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, True, 0.0, False, scale=scale)[:2]
    elif kernel == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, False, attn_mask=bias, scale=scale)
    else:
        raise ValueError(f"unknown attention kernel {kernel!r}")
    # [kvh, chunks, rows], [.., rows, 1] or [.., rows rounded up]: the rows' values, in that order
    return out, lse.reshape(*query.shape[:2], -1)[..., :query.shape[2]]


def tree_sum(x: torch.Tensor) -> torch.Tensor:
    """The sum over dim 1 as a fixed tree: padded with zeros to a power of two, then halves added
    until one is left. Appending zeros to `x` along dim 1 changes no bit of the result (a
    reduction kernel may group its terms differently at another length)."""
    n = 1 << (x.shape[1] - 1).bit_length()
    if n != x.shape[1]:
        x = torch.cat([x, x.new_zeros((x.shape[0], n - x.shape[1], *x.shape[2:]))], dim=1)
    while x.shape[1] > 1:
        half = x.shape[1] // 2
        x = x[:, :half] + x[:, half:]
    return x[:, 0]


def merge_chunks(out: torch.Tensor, lse: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """The chunks' outputs [kvh, chunks, rows, dim] merged into one [kvh, rows, dim], each weighed
    by exp(its log-sum-exp); `visible` [chunks, rows]: whether the row sees any key of the chunk
    (a chunk it sees none of weighs zero, whatever its kernel wrote for it)."""
    lse = torch.where(visible, lse, float("-inf"))
    weight = torch.exp(lse - lse.amax(dim=1, keepdim=True))  # chunk 0 is always visible: finite max
    weighed = torch.where(visible[..., None], out.float() * weight[..., None], 0.0)
    return (tree_sum(weighed) / tree_sum(weight)[..., None]).to(out.dtype)


def split_attention(query, key, value, mask, scale=None, merge=merge_chunks, kernel=None):
    """Attention of the folded `query` [1, kvh, rows, dim] over `key`/`value` [1, kvh, span, dim]
    with the additive `mask` [1, 1, rows, span] (a row sees a prefix of the keys), the span a
    multiple of `CHUNK`; [1, kvh, rows, dim], as one scaled_dot_product_attention call gives.
    `kernel`: one of `KERNELS` (None: the last one of the query's device)."""
    _, kv_heads, rows, dim = query.shape
    span, chunk = key.shape[2], CHUNK  # read per call: a test may shorten it
    if span % chunk:
        raise ValueError(f"a split attention's key span ({span}) must be a multiple of {chunk}")
    chunks = span // chunk
    queries = query[0].unsqueeze(1).expand(kv_heads, chunks, rows, dim)
    keys, values = key[0].unflatten(1, (chunks, chunk)), value[0].unflatten(1, (chunks, chunk))
    bias = mask[0, 0].unflatten(1, (chunks, chunk)).transpose(0, 1)  # [chunks, rows, chunk]
    kernel = kernel or kernels_for(query.device.type)[-1]
    out, lse = chunk_outputs(queries, keys, values, bias[None].expand(kv_heads, -1, -1, -1), scale, kernel)
    visible = bias[:, :, 0] == 0  # a row sees a prefix of the keys: any of a chunk's iff its first
    return merge(out, lse, visible)[None]


def split_agrees(query, key, value, mask, merge=merge_chunks, kernel=None) -> bool:
    """The split attention gives what one plain attention call does, within bfloat16 rounding:
    the check that the device's kernels report what the merge assumes (a natural log-sum-exp per
    row and chunk)."""
    split = split_attention(query, key, value, mask, merge=merge, kernel=kernel).float()
    plain = F.scaled_dot_product_attention(query, key, value, attn_mask=mask).float()
    return bool(torch.isfinite(split).all()) and torch.allclose(split, plain, atol=AGREEMENT_ATOL, rtol=0)
