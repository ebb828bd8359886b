"""An explicit KV cache that knows which tokens it holds, so unchanged prefixes are reused."""
from __future__ import annotations

import torch

from foresay.engine.llm import ChatLM


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class KVCache:
    """The model's KV cache plus the token ids it covers, position by position."""

    def __init__(self, lm: ChatLM):
        self.lm = lm
        self.tokens: list[int] = []
        self._cache = lm.new_cache()

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
