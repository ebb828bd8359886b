"""A static KV cache: buffers preallocated to the context limit, passes of a few fixed shapes.

Every pass writes its tokens' keys and values into buffers sized to the conversation's context
limit and attends over a span of the buffer through a position mask: a pass is one of a few fixed
row counts (padded) over one of a few key spans (doubling from `SPAN_MIN` to the whole buffer, the
smallest that holds the pass), and on CUDA each shape is a captured graph (`engine.llm.cuda_graphs`)
replayed without Python's launch overhead. Attention reads its whole span whatever the mask hides,
so a span near the conversation's length, not the context limit, keeps a decode step near the cost
of reading the weights. Cropping moves a length; the history stays resident across turns.

Exact mode (`llm.exact`, the default): every pass has the same shape, `exact_tokens` rows, so what
is computed for a position does not depend on how many tokens shared its pass, where the chunk
boundaries fell, or whether it was verified in a batch or decoded as one step. Row results of a
matrix product of one fixed shape do not depend on the other rows; norms, rotary embeddings and
activations are per row; attention masks by position, and a masked key adds an exact zero however
long the span (measured at warm-up, `StaticEngine.probe_spans`; a device where the span changes a
bit attends over the whole buffer in exact mode). So by induction over positions, keys, values and
logits are a function of the token prefix alone, and PredGen-greedy equals greedy decoding bit for
bit on any device. Fast mode decodes a step with one-row kernels and pads verification to the
smallest bucket: cheaper, but two different shapes may round a near-tie differently.

On CUDA an exact pass's attention is split along the keys (`engine.llm.split_attention`): a 64-row
pass gives one fused attention kernel too few query tiles to fill the GPU; chunks of a fixed size
keep every span's result the same, and the warm-up checks both on the device.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from functools import partial

import torch

from foresay.engine.llm.cuda_graphs import graph_pool, make_pass, static_passes_supported
from foresay.engine.errors import ForesayError, PromptTooLong
from foresay.engine.llm.cache import PrefixReuse
from foresay.engine.llm.split_attention import CHUNK, kernels_for, split_agrees
from foresay.engine.llm.static_attention import (attention_name, attention_of, merge_for, position_mask,
                                                 register_attention, static_attention)

log = logging.getLogger(__name__)

CACHE_KINDS = ("auto", "static", "dynamic")
FAST_BUCKETS = (1, 16, 32, 64, 128)   # row counts of captured passes in fast mode
EAGER_CHUNK = 128                      # longest pass without graphs in fast mode
# Rows of every pass in exact mode: on a GPU a 64-row pass costs about what a 1-row pass does
# (both read all weights once) and holds a 16-token tail plus a 32-token draft; on a CPU the
# arithmetic is paid per row, so its passes are shorter.
EXACT_TOKENS = {"cuda": 64}
EXACT_TOKENS_OTHER = 16
SPAN_MIN = 1024                        # the shortest key span a pass attends over
SPLIT_DEVICES = ("cuda",)              # where exact mode splits attention along the keys
ARCHITECTURES = ("qwen2", "llama", "qwen3")  # decoder-only, plain full attention, plain LM head


def static_unsupported(config) -> str | None:
    """Why the static cache cannot run a model of this config (None: it can)."""
    kind = getattr(config, "model_type", "?")
    if not static_passes_supported():
        return "the static cache needs transformers 5"
    if kind not in ARCHITECTURES:
        return f"architecture {kind!r} is not one the static cache supports ({', '.join(ARCHITECTURES)})"
    types = getattr(config, "layer_types", None)
    if types is not None and any(t != "full_attention" for t in types):
        return "the model has sliding-window layers (the dynamic cache handles them)"
    if types is None and getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return "the model uses sliding-window attention (the dynamic cache handles it)"
    return None


def choose_cache(kind: str, device: torch.device, config) -> str:
    """"auto" becomes "static" on CUDA where the model allows it, else "dynamic"; an explicit
    "static" the model cannot run is an error."""
    if kind not in CACHE_KINDS:
        raise ForesayError(f"LLM config: cache {kind!r} is not one of {', '.join(CACHE_KINDS)}")
    reason = static_unsupported(config)
    if kind == "static" and reason:
        raise ForesayError(f"llm.cache = 'static' cannot run this model: {reason}; "
                           "use llm.cache = 'dynamic'")
    if kind == "auto":
        if device.type == "cuda" and reason:
            log.info("dynamic KV cache: %s", reason)
        return "static" if device.type == "cuda" and not reason else "dynamic"
    return kind


def exact_tokens(device: torch.device) -> int:
    return EXACT_TOKENS.get(device.type, EXACT_TOKENS_OTHER)


def pass_plan(n: int, sizes: tuple[int, ...] | None) -> list[tuple[int, int]]:
    """(real tokens, padded rows) of each pass that runs `n` tokens: chunks of the largest size,
    each padded to the smallest size that holds it; `sizes` None: unpadded chunks."""
    if n < 1:
        raise ValueError("a pass needs at least one token")
    chunk = max(sizes) if sizes else EAGER_CHUNK
    plan = []
    for done in range(0, n, chunk):
        real = min(chunk, n - done)
        plan.append((real, min(s for s in sizes if s >= real) if sizes else real))
    return plan


def head_size(config) -> int:
    """The size of one attention head (a config's `head_dim`, else the hidden size per head)."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def key_spans(length: int, shortest: int = SPAN_MIN) -> tuple[int, ...]:
    """Key spans of a buffer of `length` positions: doubling from `shortest`, then the whole
    buffer (a doubling within a quarter of it is dropped: its graph would buy little)."""
    spans, span = [], shortest
    while span * 4 < length * 3:
        spans.append(span)
        span *= 2
    return (*spans, length)


class _Buffers:
    """The keys and values of every layer, written in place at the pass's positions; what the
    model's attention layers see as their cache."""

    def __init__(self, config, length: int, device: torch.device, dtype: torch.dtype):
        shape = (1, config.num_key_value_heads, length, head_size(config))
        # zeros, not empty: a masked key still enters the score, and garbage could be NaN
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.write_at: torch.Tensor | None = None
        self.span = length

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys.index_copy_(2, self.write_at, key_states)
        values.index_copy_(2, self.write_at, value_states)
        return keys[:, :, :self.span], values[:, :, :self.span]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        raise RuntimeError("internal: the static cache passes positions explicitly")


class _Shape:
    """One pass shape, rows over a key span: its static inputs and its (captured or eager) pass."""

    def __init__(self, cache: "StaticKVCache", rows: int, span: int):
        device = cache.engine.device
        self.rows, self.span = rows, span
        self.ids = torch.zeros((1, rows), dtype=torch.long, device=device)
        self.pos = torch.arange(rows, device=device)  # the fresh cache is empty: warm-up writes are harmless
        self.run = make_pass(partial(cache._forward, self), device, cache.pool, capture=cache.capture)


class StaticKVCache(PrefixReuse):
    """The KVCache interface (`engine.llm.cache`) over static buffers."""

    def __init__(self, engine: "StaticEngine", capture: bool = True):
        self.engine = engine
        self.capture = capture and engine.graphs  # False: eager passes, the kernels a profiler can see
        self.lm = engine.lm
        self.tokens: list[int] = []
        config = engine.model.config
        self.capacity = engine.capacity
        length = engine.buffer_length
        self.spans = engine.spans
        self._groups = config.num_attention_heads // config.num_key_value_heads
        with torch.inference_mode():
            self._buffers = _Buffers(config, length, engine.device, engine.model.dtype)
            self._key_index = torch.arange(length, device=engine.device)
            self._shapes: dict[tuple[int, int], _Shape] = {}
            # a pool of this cache's own: its graphs live and die together (see `graph_pool`)
            self.pool = graph_pool(engine.device)
            if self.capture:  # captured now, while the cache is empty
                for rows in engine.sizes or ():
                    for span in self.spans:
                        self._shapes[rows, span] = _Shape(self, rows, span)

    def span_for(self, end: int) -> int:
        """The key span of a pass whose last real token sits before position `end`."""
        return min(span for span in self.spans if span >= end)

    def crop(self, length: int) -> None:
        if not 0 <= length <= len(self.tokens):
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {length}")
        del self.tokens[length:]

    @torch.inference_mode()
    def append(self, ids: list[int], keep_logits: int | None = None) -> torch.Tensor:
        """Run `ids` after the cached tokens; float32 logits of the last `keep_logits` positions
        (all: None or 0, as in the dynamic cache)."""
        if not ids:
            raise ValueError("append needs at least one token")
        n, start = len(ids), len(self.tokens)
        keep = n if not keep_logits else min(keep_logits, n)
        if start + n > self.capacity:
            raise PromptTooLong(f"the conversation would take {start + n} tokens; the static KV cache "
                                f"holds {self.capacity} (llm.max_context)")
        began = time.perf_counter()
        rows_out, done, passes = [], 0, 0
        for real, rows in pass_plan(n, self.engine.sizes):
            shape = self._shape(rows, self.span_for(start + done + real))
            chunk = torch.tensor(ids[done:done + real] + [0] * (rows - real), dtype=torch.long)
            shape.ids[0].copy_(chunk, non_blocking=True)
            torch.add(self._key_index[:rows], start + done, out=shape.pos)
            logits = shape.run()
            first = max(0, n - keep - done)
            if first < real:
                rows_out.append(logits[first:real].float())
            done += real
            passes += 1
        out = torch.cat(rows_out) if len(rows_out) > 1 else rows_out[0]
        if self.engine.device.type == "cuda":
            torch.cuda.synchronize()
        self.tokens.extend(ids)
        stats = self.lm.stats
        stats.seconds += time.perf_counter() - began
        stats.passes += passes
        stats.tokens += n
        return out

    def _shape(self, rows: int, span: int) -> _Shape:
        shape = self._shapes.get((rows, span))
        if shape is None:
            shape = self._shapes[rows, span] = _Shape(self, rows, span)
        return shape

    def keep_spans(self, spans: tuple[int, ...]) -> None:
        """Attend over these spans only; the passes of the others are dropped."""
        self.spans = spans
        self._shapes = {key: shape for key, shape in self._shapes.items() if key[1] in spans}

    @contextmanager
    def whole_span(self):
        """Every pass inside attends over the whole buffer (what `probe_exact` compares with)."""
        spans, self.spans = self.spans, self.spans[-1:]
        try:
            yield
        finally:
            self.spans = spans

    def _forward(self, shape: _Shape) -> torch.Tensor:
        """The pass over `shape`'s static inputs: logits of every row, in the model's dtype."""
        model = self.engine.model
        mask = position_mask(self._key_index[:shape.span], shape.pos, model.dtype, self._groups)
        self._buffers.write_at, self._buffers.span = shape.pos, shape.span
        with attention_of(model.config, self.engine.attention_name):
            hidden = model.model(input_ids=shape.ids, position_ids=shape.pos[None], attention_mask=mask,
                                 past_key_values=self._buffers, use_cache=True).last_hidden_state
        return self.engine.head(hidden[0])


class StaticEngine:
    """One LM's static-cache settings and pre-captured spare cache."""

    def __init__(self, lm, exact: bool = True, split: str = "auto"):
        reason = static_unsupported(lm.model.config)
        if reason:
            raise ForesayError(f"the static KV cache cannot run {lm.name}: {reason}")
        register_attention()
        self.lm, self.model, self.device, self.exact = lm, lm.model, lm.device, exact
        self.head = lm.model.get_output_embeddings()
        self.capacity = lm.max_context
        # room for padding rows past the end; whole chunks of split attention
        self.buffer_length = -(-(self.capacity + EAGER_CHUNK) // CHUNK) * CHUNK
        self.spans = key_spans(self.buffer_length)
        self.graphs = self.device.type == "cuda" and torch.cuda.is_available()
        if exact:
            self.sizes: tuple[int, ...] | None = (exact_tokens(self.device),)
        else:
            self.sizes = FAST_BUCKETS if self.graphs else None
        # split attention along the keys (exact mode; "auto": on CUDA); the warm-up may undo it
        self.split = exact and (self.device.type in SPLIT_DEVICES if split == "auto" else split == "on")
        self.split_kernel = kernels_for(self.device.type)[-1]  # the warm-up's probe picks
        self.exact_verified: bool | None = None  # set by warmup() in exact mode
        self._spare: StaticKVCache | None = None

    @property
    def attention_kernel(self) -> str | None:
        """The kernel that runs split attention's chunks; None: attention is one call."""
        return self.split_kernel if self.split else None

    @property
    def attention_name(self) -> str:
        return attention_name(self.attention_kernel)

    def attention(self, query, key, value, mask):
        """The attention every pass of this engine runs, on the heads-first query: [1, heads,
        rows, dim] -> [1, rows, heads, dim]."""
        return static_attention(None, query, key, value, mask, kernel=self.attention_kernel)[0]

    def kv_cache(self) -> StaticKVCache:
        """A cache of its own buffers (and graphs); the one warmed up before 'ready' comes first."""
        cache, self._spare = self._spare, None  # (an empty cache is falsy: it has a length)
        return cache if cache is not None else StaticKVCache(self)

    def captured(self, cache: StaticKVCache) -> int:
        return sum(1 for s in cache._shapes.values() if s.run.captured)

    def warmup(self) -> StaticKVCache:
        """Build (and on CUDA capture) a cache, run passes through it, check exact mode on this
        device (`exact_verified`), and keep the cache as the next `kv_cache()`."""
        if self.split and not self.probe_split():
            log.warning("attention is not split along the keys on this device: its chunks did not "
                        "merge into what one attention call gives")
            self.split, self._spare = False, None
        cache = self.kv_cache()
        ids = self.lm.encode("Hello, how are you today? Tell me about the weather in Paris.") or [0]
        if self.exact and len(self.spans) > 1 and not self.probe_spans():
            log.warning("exact mode attends over the whole KV buffer on this device (slower steps): "
                        "a position's logits changed with the key span of its pass")
            self.spans = self.spans[-1:]
            cache.keep_spans(self.spans)
        self.exact_verified = self.probe_exact(cache, ids) if self.exact else False
        if self.exact and not self.exact_verified:
            log.warning("exact mode is NOT exact on this device: a position's logits changed with its "
                        "row in the pass (a matrix kernel whose order depends on the row); PredGen-greedy "
                        "may differ from greedy decoding at near-ties")
        cache.reset()
        self._spare = cache
        return cache

    def _probe_inputs(self, seed: int):
        """What the attention probes draw from: the model's key heads, query heads per key head and
        head size, the rows of a pass, and a maker of random tensors (the model's dtype and device,
        from a generator seeded with `seed`)."""
        config = self.model.config
        head_dim = head_size(config)
        kv_heads, groups = config.num_key_value_heads, config.num_attention_heads // config.num_key_value_heads
        generator = torch.Generator(device=self.device).manual_seed(seed)

        def random(*shape):
            return torch.randn(shape, generator=generator, device=self.device).to(self.model.dtype)

        return kv_heads, groups, head_dim, max(self.sizes or (EAGER_CHUNK,)), random

    @torch.inference_mode()
    def probe_spans(self) -> bool:
        """A pass's attention over its key span and over every longer span (keys past its last
        position masked) is bit for bit equal, for a pass at the end of each span: then the span
        changes no logit, since attention is the only computation that sees it. Random queries,
        keys and values of the model's shapes, dtype and device; a kernel that blocks or reduces
        the keys differently at another length fails this."""
        kv_heads, groups, head_dim, rows, random = self._probe_inputs(seed=0)
        keys, values = random(1, kv_heads, self.buffer_length, head_dim), random(1, kv_heads, self.buffer_length, head_dim)
        query = random(1, kv_heads * groups, rows, head_dim)
        index = torch.arange(self.buffer_length, device=self.device)
        for i, span in enumerate(self.spans[:-1]):
            pos = torch.arange(max(0, span - rows), span, device=self.device)
            pos = torch.cat([pos, pos[-1:].expand(rows - len(pos))])
            outs = []
            for longer in self.spans[i:]:
                mask = position_mask(index[:longer], pos, self.model.dtype, groups)
                outs.append(self.attention(query, keys[:, :, :longer], values[:, :, :longer], mask))
            if not all(torch.equal(outs[0], out) for out in outs[1:]):
                return False
        return True

    @torch.inference_mode()
    def probe_split(self) -> bool:
        """Split attention runs on this device and agrees with one plain attention call, on random
        queries, keys and values of the model's shapes over the shortest span, rows spread over it
        (some see one chunk, some all), with the first of the device's kernels that does
        (`split_kernel`); False (with the reasons logged) where none does."""
        kv_heads, groups, head_dim, rows, random = self._probe_inputs(seed=1)
        span = self.spans[0]
        query = random(1, kv_heads, groups * rows, head_dim)
        keys, values = random(1, kv_heads, span, head_dim), random(1, kv_heads, span, head_dim)
        pos = torch.linspace(0, span - 1, rows, device=self.device).long()
        mask = position_mask(torch.arange(span, device=self.device), pos, self.model.dtype, groups)
        for kernel in kernels_for(self.device.type):
            try:
                if split_agrees(query, keys, values, mask, merge=merge_for(self.device), kernel=kernel):
                    self.split_kernel = kernel
                    return True
                log.warning("split attention with %s kernels does not agree with one attention call", kernel)
            except Exception as exc:  # noqa: BLE001 - a kernel missing on this device: the next one
                log.warning("split attention with %s kernels failed its probe (%s: %s)",
                            kernel, type(exc).__name__, exc)
        return False

    @staticmethod
    def probe_exact(cache: StaticKVCache, ids: list[int]) -> bool:
        """Logits of the same tokens run as one pass and in uneven chunks (every position at
        another row of its pass) are bit for bit equal: the premise of exact mode, measured."""
        ids = (ids * (1 + 24 // len(ids)))[:24]
        cache.reset()
        whole = cache.append(ids)
        cache.reset()
        parts, at = [], 0
        for n in (1, 5, 1, 7, 3, 7):
            parts.append(cache.append(ids[at:at + n]))
            at += n
        return torch.equal(whole, torch.cat(parts))
