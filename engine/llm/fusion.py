"""The chat model's small operations fused by torch.compile, ahead of the static cache's capture.

A captured decode step (`engine.llm.static_cache`) has no launch overhead left, yet its graph
still replays hundreds of small kernels between the matrix products: RMSNorm's casts and
reduction, the rotary embedding's slices and concatenations, the gated activation. `fuse_decoder`
compiles those leaf computations in place, so each becomes one or two generated kernels that the
static cache then captures like any other. Only leaves are compiled, never code that writes the KV
cache: a decoder layer passes its index and the pass's key span (Python ints) to the cache, so a
compiled layer would be traced again per layer and per span, and a whole-model graph takes minutes
to compile. The compiled code uses no CUDA graphs of its own (the static cache records its own).

Compiled code rounds differently from eager PyTorch (inductor keeps a fused chain of bfloat16
operations in float32), so a fused model's logits are near, not equal to, the plain model's.
Exact mode stays exact: every pass of the fused model has the same shape, and the warm-up's probes
check that on the device. The app fuses on CUDA (`llm.fuse`, `ChatLM.fuse`); a warm-up that fails
to compile undoes it (`unfuse_decoder`). The GPU kit's `fusion` section measures it.
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import Callable

import torch

BACKEND = "inductor"  # what `fuse_decoder` compiles with unless told
ROTARY = "apply_rotary_pos_emb"  # the module-level function attention layers call (Qwen2, Qwen3, Llama)


@dataclass(frozen=True)
class Fusion:
    """What `fuse_decoder` compiled."""
    backend: str  # a backend given as a function: its name
    norms: int  # RMSNorm modules (a layer's two, the final one, Qwen3's per-head ones)
    mlps: int  # gated MLPs: the activation and product fuse between the three matrix products
    rotary: int  # attention modules whose rotary embedding is compiled (0: not found in their code)


def fuse_decoder(lm, backend: str | Callable | None = None) -> Fusion:
    """Compile the norms, MLPs and rotary embeddings of `lm`'s (a ChatLM's) decoder in place with
    torch.compile's `backend` ("aot_eager" traces without generating code: a cheap check on a
    CPU). Compilation happens on first use, so in the next warm-up; the static engine is dropped,
    as its captured graphs hold the unfused kernels."""
    backend = BACKEND if backend is None else backend
    options = {"backend": backend, "dynamic": False, "fullgraph": True}
    norms, mlps = _leaves(lm)
    for module in norms + mlps:
        module.compile(**options)
    rotary = _compile_rotary([layer.self_attn for layer in lm.model.model.layers], options)
    lm.drop_static_engine()
    return Fusion(getattr(backend, "__name__", backend), len(norms), len(mlps), rotary)


def unfuse_decoder(lm) -> None:
    """Undo `fuse_decoder`: the plain modules again, and the static engine dropped."""
    norms, mlps = _leaves(lm)
    for module in norms + mlps:
        module._compiled_call_impl = None  # what nn.Module.compile set
    for layer in lm.model.model.layers:
        layer.self_attn.__dict__.pop("forward", None)  # the class's own forward again
    lm.drop_static_engine()


def _leaves(lm) -> tuple[list, list]:
    decoder = lm.model.model
    return [m for m in decoder.modules() if type(m).__name__.endswith("RMSNorm")], [layer.mlp for layer in decoder.layers]


def _compile_rotary(attentions: list, options: dict) -> int:
    """Give each attention module a forward that calls a compiled rotary function; how many got
    one. Attention itself stays eager (it writes the KV cache), so its forward is copied with the
    module-level function replaced, not compiled."""
    forward = type(attentions[0]).forward
    inner = _innermost(forward)
    original = inner.__globals__.get(ROTARY) if ROTARY in inner.__code__.co_names else None
    if original is None:
        return 0
    rebound = _with_global(forward, ROTARY, torch.compile(original, **options))
    if rebound is None:
        return 0
    for attention in attentions:
        attention.forward = types.MethodType(rebound, attention)
    return len(attentions)


def _innermost(function):
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function


def _with_global(function, name: str, value):
    """A copy of `function` that sees `value` as its global `name`, through decorators made with
    functools.wraps (a copy of the wrapper calls a copy of what it wraps); None where a wrapper
    does not hold what it wraps in its closure, so the copy could not reach it."""
    inner = getattr(function, "__wrapped__", None)
    if inner is None:
        namespace, closure = {**function.__globals__, name: value}, function.__closure__
    else:
        inner_copy = _with_global(inner, name, value)
        cells = function.__closure__ or ()
        if inner_copy is None or not any(_holds(cell, inner) for cell in cells):
            return None
        namespace = function.__globals__
        closure = tuple(types.CellType(inner_copy) if _holds(cell, inner) else cell for cell in cells)
    copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, closure)
    functools.update_wrapper(copy, function)
    copy.__kwdefaults__ = function.__kwdefaults__
    if inner is not None:
        copy.__wrapped__ = inner_copy
    return copy


def _holds(cell, value) -> bool:
    try:
        return cell.cell_contents is value
    except ValueError:  # an empty cell
        return False
