"""An explicit KV cache that knows which tokens it holds, so unchanged prefixes are reused."""
from __future__ import annotations

import torch

from foresay.engine.llm import ChatLM
from foresay.engine.sequences import common_prefix_length


def _growable_layer_class():
    """A DynamicLayer that writes into preallocated buffers instead of concatenating.

    transformers' DynamicLayer copies the whole cache on every step (torch.cat), which makes a
    token's cost grow with the conversation; this one doubles its capacity when full, so appends
    are amortized O(1) and crops only move a length.
    """
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # transformers 4.x without cache layers: keep its own cache
        return None

    class GrowableLayer(DynamicLayer):
        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            self._k = key_states.new_empty(key_states.shape[:-2] + (256, key_states.shape[-1]))
            self._v = value_states.new_empty(value_states.shape[:-2] + (256, value_states.shape[-1]))
            self._len = 0
            self.keys, self.values = self._k[..., :0, :], self._v[..., :0, :]
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self._len + key_states.shape[-2]
            if end > self._k.shape[-2]:
                size = max(end, 2 * self._k.shape[-2])
                self._k, self._v = self._grown(self._k, size), self._grown(self._v, size)
            self._k[..., self._len:end, :] = key_states
            self._v[..., self._len:end, :] = value_states
            self._len = end
            self.keys, self.values = self._k[..., :end, :], self._v[..., :end, :]
            return self.keys, self.values

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
                self._len = max(0, self._len + tokens_to_remove)
                self.keys, self.values = self._k[..., :self._len, :], self._v[..., :self._len, :]

        def reset(self) -> None:
            if self.is_initialized:
                self.crop(-self._len)

    return GrowableLayer


_GROWABLE = _growable_layer_class()


def new_cache(lm: ChatLM):
    """The model's dynamic cache, with growable layers where its layers are plain full attention."""
    cache = lm.new_cache()
    layers = getattr(cache, "layers", None)
    if _GROWABLE is not None and layers and all(type(l).__name__ == "DynamicLayer" for l in layers):
        cache.layers = [_GROWABLE() for _ in layers]
    return cache


class KVCache:
    """The model's KV cache plus the token ids it covers, position by position."""

    def __init__(self, lm: ChatLM):
        self.lm = lm
        self.tokens: list[int] = []
        self._cache = new_cache(lm)

    def __len__(self) -> int:
        return len(self.tokens)

    def crop(self, length: int) -> None:
        """Keep the first `length` tokens. (transformers 5 crops by a negative count to drop.)"""
        drop = len(self.tokens) - length
        if drop < 0:
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {length}")
        if drop:
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

    def sync_start(self, ids: list[int]) -> int:
        """Where `ids` first differs from the cached tokens."""
        return common_prefix_length(self.tokens, ids)

    def sync(self, ids: list[int], min_new: int = 1) -> tuple[int, torch.Tensor | None]:
        """Make the cache hold exactly `ids`, reusing the longest common prefix.

        At least `min_new` trailing tokens are recomputed (their logits are returned), so a caller
        that needs the logits of the last position gets them even when all of `ids` was cached.
        Returns (start, logits): logits row i belongs to position start + i.
        """
        start = min(common_prefix_length(self.tokens, ids), len(ids) - min_new)
        start = max(start, 0)
        self.crop(start)
        if start == len(ids):
            return start, None
        return start, self.append(ids[start:])

    def reset(self) -> None:
        self.crop(0)
