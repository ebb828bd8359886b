"""The dynamic KV cache: transformers' cache with growable layers, and the tokens it holds."""
from __future__ import annotations

import logging

from typing import TYPE_CHECKING

import torch

from foresay.engine.llm.cache import PrefixReuse

if TYPE_CHECKING:
    from foresay.engine.llm.model import ChatLM

log = logging.getLogger(__name__)


def _growable_layer_classes():
    """Cache layers that write into preallocated buffers instead of concatenating.

    transformers' DynamicLayer copies the whole cache on every step (torch.cat), which makes a
    token's cost grow with the conversation; these double their capacity when full, so appends
    are amortized O(1) and crops only move a length.

    The sliding-window variant keeps every past state (transformers' own layer keeps only the
    last window, so it cannot be cropped back once the window is full) and hands attention exactly
    what transformers' layer would: the last `window - 1` states before the new ones.
    """
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # transformers 4.x without cache layers: keep its own cache
        return None, None

    class GrowableLayer(DynamicLayer):
        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            self._k = key_states.new_empty(key_states.shape[:-2] + (256, key_states.shape[-1]))
            self._v = value_states.new_empty(value_states.shape[:-2] + (256, value_states.shape[-1]))
            self._len = 0
            self.keys, self.values = self._k[..., :0, :], self._v[..., :0, :]
            self.is_initialized = True

        def _visible_from(self, past: int) -> int:
            """First position handed to attention when `past` states precede the new ones."""
            return 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            past = self._len
            end = past + key_states.shape[-2]
            if end > self._k.shape[-2]:
                size = max(end, 2 * self._k.shape[-2])
                self._k, self._v = self._grown(self._k, size), self._grown(self._v, size)
            self._k[..., past:end, :] = key_states
            self._v[..., past:end, :] = value_states
            self._set_length(end)
            first = self._visible_from(past)
            return self._k[..., first:end, :], self._v[..., first:end, :]

        def _set_length(self, length: int) -> None:
            self._len = length
            self.keys, self.values = self._k[..., :length, :], self._v[..., :length, :]

        def _grown(self, buffer: torch.Tensor, size: int) -> torch.Tensor:
            bigger = buffer.new_empty(buffer.shape[:-2] + (size, buffer.shape[-1]))
            bigger[..., :self._len, :] = buffer[..., :self._len, :]
            return bigger

        def get_seq_length(self) -> int:
            return self._len if self.is_initialized else 0

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("crop takes the number of tokens to drop as a negative count")
            if self.is_initialized and tokens_to_remove:
                self._set_length(max(0, self._len + tokens_to_remove))

        def reset(self) -> None:
            if self.is_initialized:
                self.crop(-self._len)

    class GrowableSlidingLayer(GrowableLayer):
        is_sliding = True

        def __init__(self, sliding_window: int, **kwargs):
            super().__init__()
            self.sliding_window = sliding_window
            self._sliding_window_tensor = torch.tensor(sliding_window, dtype=torch.long)

        def lazy_initialization(self, key_states, value_states) -> None:
            super().lazy_initialization(key_states, value_states)
            self._sliding_window_tensor = self._sliding_window_tensor.to(self.device)

        def _visible_from(self, past: int) -> int:
            return max(0, past - self.sliding_window + 1)

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            past = self.get_seq_length()
            return min(past, self.sliding_window - 1) + query_length, self._visible_from(past)

        def get_max_length(self) -> int:
            return self.sliding_window

    return GrowableLayer, GrowableSlidingLayer


_GROWABLE, _GROWABLE_SLIDING = _growable_layer_classes()


def growable_transformers_cache(lm: ChatLM):
    """The model's dynamic cache, its attention layers replaced by growable ones.

    Returns (cache, croppable): a cache with a layer type this module does not know (recurrent
    state, compressed or quantized KV) keeps its layers and reports False: cropping it means
    computing the kept prefix again.
    """
    cache = lm.transformers_cache()
    layers = getattr(cache, "layers", None)
    if _GROWABLE is None or not layers:
        return cache, True
    kinds = [type(layer).__name__ for layer in layers]
    known = {"DynamicLayer", "DynamicSlidingWindowLayer", "DummyLayer"}
    if not set(kinds) <= known:
        return cache, False
    cache.layers = [_GROWABLE() if kind == "DynamicLayer"
                    else _GROWABLE_SLIDING(layer.sliding_window) if kind == "DynamicSlidingWindowLayer"
                    else layer for layer, kind in zip(layers, kinds)]
    return cache, True


class DynamicKVCache(PrefixReuse):
    """The model's transformers cache plus the token ids it covers, position by position."""

    def __init__(self, lm: ChatLM):
        self.lm = lm
        self.tokens: list[int] = []
        self._cache, self._croppable = growable_transformers_cache(lm)
        if not self._croppable:
            log.warning("%s has cache layers that cannot be cut back (%s): every rejected draft "
                        "recomputes the kept prefix", lm.name,
                        ", ".join(sorted({type(l).__name__ for l in self._cache.layers})))

    def crop(self, length: int) -> None:
        """Keep the first `length` tokens. (transformers 5 crops by a negative count to drop.)"""
        drop = len(self.tokens) - length
        if drop < 0:
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {length}")
        if drop and not self._croppable:
            kept = self.tokens[:length]
            self._cache, _ = growable_transformers_cache(self.lm)
            self.tokens = []
            if kept:
                self.append(kept, keep_logits=1)
        elif drop:
            self._cache.crop(-drop)
            del self.tokens[length:]

    def append(self, ids: list[int], keep_logits: int | None = None) -> torch.Tensor:
        """Run `ids` after the cached tokens; logits of the last `keep_logits` positions (all: None)."""
        if not ids:
            raise ValueError("append needs at least one token")
        keep = len(ids) if keep_logits is None else keep_logits
        logits = self.lm.forward(self._cache, ids, keep)
        self.tokens.extend(ids)
        return logits

    def append_with(self, forward, ids: list[int]):
        """Like `append`, through another pass over the same model cache: `forward(cache, ids)`
        must append exactly `ids` to it (Speculative Streaming's pass also computes stream
        positions, which it never stores); returns what `forward` returns."""
        if not ids:
            raise ValueError("append_with needs at least one token")
        out = forward(self._cache, ids)
        self.tokens.extend(ids)
        return out
