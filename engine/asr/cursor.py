"""A decoder's state over one audio window, with an explicit key/value cache.

`CacheCursor` is what the decoding algorithms (greedy.py, specasr.py) see of a decoder: the
cache holds one entry per token in `cached` (a prefix of the sequence being decoded), after
`context_length` entries prefilled once (an LLM-based recognizer's audio and prompt; none for
Whisper, whose audio is cross-attended). `extend` appends a chain of tokens; `tree` scores a
token tree in one pass (each node sees the context, the cache prefix its root follows and its
own ancestors, through an additive mask, at the position its depth gives) and must be followed
by `keep_path` or `drop_tree`. Positions are sequence indices; an adapter adds its context.
Adapters implement `max_positions` and `_forward`: `DecoderCursor` (Whisper, below) and
`LlmCursor` (llm_cursor.py).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from foresay.engine.asr.errors import AsrError
from foresay.engine.sequences import common_prefix_length


class CacheCursor(ABC):
    def __init__(self, model, cache) -> None:
        self.model = model
        self.cache = cache
        self.context_length = 0  # prefilled cache entries before the sequence
        self.cached: list[int] = []
        self.passes = 0  # decoder forward passes, the unit every statistic counts
        self._tree_nodes = 0

    @property
    @abstractmethod
    def max_positions(self) -> int:
        """Sequence positions the decoder can hold after its context."""

    @abstractmethod
    def _forward(self, tokens: Sequence[int], positions: torch.Tensor, attention_mask) -> torch.Tensor:
        """Logits [len(tokens), vocab] of `tokens` fed after the cache at sequence `positions`;
        `attention_mask` is None (causal) or additive [1, 1, n, cache + n]. Counts a pass."""

    @abstractmethod
    def _cache_layers(self):
        """The cache's self-attention layers (objects with `keys` and `values`)."""

    def sync(self, sequence: Sequence[int]) -> list[int]:
        """Drop cache entries that are not a prefix of `sequence` and return the tokens still to
        feed (at least one, so the next pass yields the next token's logits)."""
        keep = min(common_prefix_length(self.cached, sequence), len(sequence) - 1)
        self._crop(keep)
        return list(sequence[keep:])

    def extend(self, tokens: Sequence[int]) -> torch.Tensor:
        """Feed `tokens` after the cache; logits [len(tokens), vocab], row i predicting the token
        after tokens[i]."""
        self._no_open_tree()
        start = len(self.cached)
        positions = torch.arange(start, start + len(tokens))
        logits = self._forward(tokens, positions, attention_mask=None)
        self.cached.extend(tokens)
        return logits

    def tree(self, tokens: Sequence[int], parents: Sequence[int], root_context: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Score a token tree in one pass: node i's parent is `parents[i]` (an earlier node) or
        -1 for a root, which follows the first `root_context[i]` cache entries. Returns logits
        [n, vocab] and the nodes' sequence positions [n]."""
        self._no_open_tree()
        n, past, ctx = len(tokens), len(self.cached), self.context_length
        context, positions, paths = [0] * n, [0] * n, []  # paths: each node's ancestors and itself
        for i, parent in enumerate(parents):
            if parent >= i:
                raise AsrError(f"tree node {i} has parent {parent}; parents must come first")
            if parent < 0:
                context[i], positions[i] = root_context[i], root_context[i]
                if not 0 <= context[i] <= past:
                    raise AsrError(f"tree root {i} follows {context[i]} cache entries; the cache has {past}")
                paths.append([i])
            else:
                context[i], positions[i] = context[parent], positions[parent] + 1
                paths.append(paths[parent] + [i])
        allowed = torch.zeros(n, ctx + past + n, dtype=torch.bool)
        allowed[:, :ctx] = True
        allowed[:, ctx: ctx + past] = torch.arange(past)[None, :] < torch.tensor(context)[:, None]
        rows = [i for i, path in enumerate(paths) for _ in path]
        allowed[rows, [ctx + past + j for path in paths for j in path]] = True  # each node sees its path
        dtype = self.model.dtype
        mask = torch.zeros(n, ctx + past + n, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        position_tensor = torch.tensor(positions)
        logits = self._forward(tokens, position_tensor, attention_mask=mask[None, None])
        self._tree_nodes = n
        self._tree_tokens = list(tokens)
        return logits, position_tensor

    @torch.inference_mode()
    def keep_path(self, nodes: Sequence[int]) -> None:
        """Keep the open tree's `nodes` (a root-to-node path, in order) after the cache."""
        past, kept = self.context_length + len(self.cached), len(nodes)
        moved = list(nodes) != list(range(kept))  # a path down the first nodes is in place already
        source = torch.tensor([past + i for i in nodes], device=self.model.device) if moved else None
        for layer in self._cache_layers():  # only the path's entries move; the cache before them stays
            if moved:
                layer.keys[..., past: past + kept, :] = layer.keys.index_select(-2, source)
                layer.values[..., past: past + kept, :] = layer.values.index_select(-2, source)
            layer.keys, layer.values = layer.keys[..., : past + kept, :], layer.values[..., : past + kept, :]
        self.cached.extend(self._tree_tokens[i] for i in nodes)
        self._tree_nodes = 0

    def drop_tree(self) -> None:
        if self._tree_nodes:
            self.cache.crop(-self._tree_nodes)
            self._tree_nodes = 0

    def _crop(self, length: int) -> None:
        self._no_open_tree()
        if length < len(self.cached):
            self.cache.crop(length - len(self.cached))
            del self.cached[length:]

    def _no_open_tree(self) -> None:
        if self._tree_nodes:
            raise AsrError("internal: a scored tree must be kept or dropped before the next pass")

    def _check_room(self, tokens: Sequence[int], positions: torch.Tensor) -> int:
        """The largest of `positions`, checked against the decoder's room."""
        if not tokens:
            raise AsrError("internal: a decoder pass needs at least one token")
        top = int(positions.max())
        if top >= self.max_positions:
            raise AsrError(f"the decoder sequence would exceed {self.max_positions} tokens")
        return top


class DecoderCursor(CacheCursor):
    """Whisper's decoder: cross-attends to the encoder output; the cache starts empty."""

    def __init__(self, model, encoder_out: torch.Tensor) -> None:
        super().__init__(model, EncoderDecoderCache(DynamicCache(), DynamicCache()))
        self.encoder_out = encoder_out

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_target_positions)

    def _cache_layers(self):
        return self.cache.self_attention_cache.layers

    @torch.inference_mode()
    def _forward(self, tokens: Sequence[int], positions: torch.Tensor, attention_mask) -> torch.Tensor:
        self._check_room(tokens, positions)
        device = self.model.device
        input_ids = torch.tensor([list(tokens)], device=device)
        hidden = self.model.model.decoder(
            input_ids=input_ids, encoder_hidden_states=self.encoder_out,
            past_key_values=self.cache, position_ids=positions.to(device)[None],
            attention_mask=None if attention_mask is None else attention_mask.to(device),
            use_cache=True).last_hidden_state
        self.passes += 1
        return self.model.proj_out(hidden)[0].float()
