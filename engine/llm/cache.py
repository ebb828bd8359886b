"""The backend interface PredGen speaks: a KV cache that knows the tokens it covers.

Three implementations: `DynamicKVCache` (transformers' growable cache, in this process),
`StaticKVCache` (preallocated buffers, fixed-shape passes, CUDA graphs) and `ServerKVCache` (an
OpenAI-compatible server's prefix cache, log-probabilities over HTTP). `PrefixReuse` gives each
of them the same prefix reuse over its own `crop` and `append`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from foresay.engine.sequences import common_prefix_length


@dataclass
class ForwardStats:
    """Forward passes run by one model and the wall time they took (for overhead accounting)."""
    passes: int = 0
    tokens: int = 0
    seconds: float = 0.0


@runtime_checkable
class KVCache(Protocol):
    """A conversation's cache: `tokens` are the ids it holds, position by position."""
    tokens: list[int]

    def __len__(self) -> int: ...

    def crop(self, length: int) -> None:
        """Keep the first `length` tokens."""

    def append(self, ids: list[int], keep_logits: int | None = None) -> torch.Tensor:
        """Run `ids` after the cached tokens; scores (logits or log-probabilities) of the last
        `keep_logits` positions (all: None), one row per position."""

    def sync_start(self, ids: list[int]) -> int:
        """Where `ids` first differs from the cached tokens."""

    def sync(self, ids: list[int], min_new: int = 1) -> tuple[int, torch.Tensor | None]:
        """Make the cache hold exactly `ids`, reusing the longest common prefix; (start, scores
        of positions start.. end)."""

    def reset(self) -> None:
        """Empty the cache."""


class PrefixReuse:
    """`sync`, `sync_start` and `reset` over a cache's own `tokens`, `crop` and `append`."""
    tokens: list[int]

    def __len__(self) -> int:
        return len(self.tokens)

    def sync_start(self, ids: list[int]) -> int:
        return common_prefix_length(self.tokens, ids)

    def sync(self, ids: list[int], min_new: int = 1) -> tuple[int, torch.Tensor | None]:
        """At least `min_new` trailing tokens are recomputed (their scores are returned), so a
        caller that needs the last position's scores gets them even when all of `ids` was cached.
        Row i of the scores belongs to position start + i."""
        start = max(min(common_prefix_length(self.tokens, ids), len(ids) - min_new), 0)
        self.crop(start)
        if start == len(ids):
            return start, None
        return start, self.append(ids[start:])

    def reset(self) -> None:
        self.crop(0)
