"""Speculative Streaming as a PredGen continuation: one pass verifies and drafts.

Each pass runs [pending, draft...] through the model's main stream, with speculative streams at
every position (`stream_model`). The main stream's argmax confirms the longest prefix of the
draft (exactly like greedy verification), the pass's argmax after it becomes the new pending
token, and the streams at the last confirmed position propose the next draft: stream j there
predicts the j-th token after the new pending one. Rejected positions are cut from the cache,
and stream positions never enter it, so after every pass the cache holds prompt + accepted
tokens. The first pass's draft is the stale draft's tail (free guesses, as Jacobi uses them).

Lossless by construction: every accepted token is the main stream's argmax at its position, and
the main stream is the model's own forward pass; so the reply is the model's greedy decoding
whatever the stream embeddings are worth (they only decide how much is accepted per pass).

Worst case (no draft token is ever right): each pass still fixes one token but costs a pass over
1 + K positions plus their streams; after `patience` such passes in a row the strategy falls back
to plain one-token steps for the rest of the turn, which bounds the loss.
"""
from __future__ import annotations

import weakref
from dataclasses import replace
from pathlib import Path

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.cache import KVCache
from foresay.engine.predgen.continuation import (Advance, ContinuationStats, GiveUpWhenSlow, _check_entry,
                                                 confirmed_prefix, plain_step)
from foresay.engine.predgen.stream_model import (STREAMS_CONFIG, StreamHeads, adapter_shapes, check_model,
                                                  multi_stream_forward)

STREAMS_MODEL = "demo-streams"  # the shipped model that has stream embeddings
_HEADS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # torch model -> its StreamHeads


def attach_stream_heads(lm, heads: StreamHeads) -> None:
    """Give a loaded model stream embeddings (tests, or heads kept outside the model folder)."""
    check_model(lm.model, heads.spec)
    if heads.spec.rank:
        shapes = adapter_shapes(lm.model, heads.spec)
        if any(shapes.get(k) != (a.shape[0], heads.b[k].shape[1]) for k, a in heads.a.items()):
            raise ForesayError(f"the stream adapters do not fit {lm.name}'s layers")
    if heads.embeddings.shape[1] != lm.model.config.hidden_size:
        raise ForesayError(f"stream embeddings of width {heads.embeddings.shape[1]} do not fit "
                           f"{lm.name} (hidden size {lm.model.config.hidden_size})")
    _HEADS[lm.model] = heads.to(device=lm.device, dtype=lm.dtype).eval()


def stream_heads(lm) -> StreamHeads:
    """The model's stream embeddings: attached, or read from its folder (`streams.json`)."""
    model = getattr(lm, "model", None)
    if model is None:
        raise ForesayError("continuation 'streams' runs the model in this process: it needs the "
                           "transformers backend, not a server")
    if model not in _HEADS:
        folder = Path(getattr(model.config, "_name_or_path", "") or ".")
        if not (folder / STREAMS_CONFIG).is_file():
            raise ForesayError(
                f"continuation 'streams' needs a model fine-tuned for Speculative Streaming (stream "
                f"embeddings in {STREAMS_CONFIG} beside its weights); {lm.name} has none: use "
                f"--model {STREAMS_MODEL} (or train one: python -m foresay.engine.demo.train_streams), "
                f"or another continuation (plain, jacobi)")
        attach_stream_heads(lm, StreamHeads.load(folder))
    return _HEADS[model]


class StreamsPass:
    """One multi-stream pass over a conversation cache, counted in the model's statistics."""

    def __init__(self, lm, heads: StreamHeads):
        self.lm = lm
        self.heads = heads

    @torch.inference_mode()
    def __call__(self, cache: KVCache, ids: list[int]) -> tuple[list[int], list[torch.Tensor]]:
        """Append `ids`; returns the main stream's argmax per position and, per position, the
        streams' normed hidden states (streams, hidden): logits only for the row that is used."""
        lm = self.lm
        with lm.counted_pass(len(ids)):
            tensor = torch.tensor([ids], dtype=torch.long, device=lm.device)
            main, streams = cache.append_with(
                lambda kv, _: multi_stream_forward(lm.model, self.heads, kv, tensor, joint=True), ids)
            argmax = lm.model.lm_head(main[0]).float().argmax(-1).tolist()
        return argmax, streams[0]

    @torch.inference_mode()
    def propose(self, stream_rows: torch.Tensor) -> list[int]:
        """The streams' tokens at one position: the draft after the next pending token."""
        return self.lm.model.lm_head(stream_rows).float().argmax(-1).tolist()


class SpeculativeStreams:
    """The continuation strategy (see the module notes). `draft`: tokens proposed for the
    positions after the pending token, at most `length` of them per pass."""
    name = "streams"

    def __init__(self, lm, heads: StreamHeads, stale: list[int], length: int | None = None,
                 give_up: GiveUpWhenSlow = GiveUpWhenSlow()):
        if lm.cache_kind != "dynamic":
            raise ForesayError("continuation 'streams' needs the dynamic KV cache: set llm.cache=dynamic")
        gamma = heads.spec.streams
        if length is not None and not 1 <= length <= gamma:
            raise ForesayError(f"continuation streams:{length}: {lm.name} has {gamma} streams, "
                               f"so a draft of 1 to {gamma} tokens")
        self.run = StreamsPass(lm, heads)
        self.length = length or gamma
        self.draft = list(stale[:self.length])
        self.give_up = give_up
        self.gains: list[int] = []
        self.stats = ContinuationStats("streams")
        self._plain = False

    def advance(self, cache: KVCache, tokens: list[int], pending: int, budget: int) -> Advance:
        _check_entry(cache, tokens, budget)
        if self._plain:
            step = plain_step(cache, pending)
            self.stats = self.stats.plus(step)
            return step
        guesses = self.draft[:min(self.length, budget - 1)]
        start = len(cache)
        argmax, streams = self.run(cache, [pending] + guesses)  # row i predicts guesses[i]
        confirmed = confirmed_prefix(guesses, argmax, cache.lm.eos_ids)
        cache.crop(start + 1 + confirmed)
        self.draft = self.run.propose(streams[confirmed])
        step = Advance((pending, *guesses[:confirmed]), argmax[confirmed], 1, 1 + len(guesses), confirmed)
        self.stats = self.stats.plus(step)
        if guesses:
            self.gains.append(confirmed)
        if self.give_up.give_up(self.gains):
            self._plain = True
            self.stats = replace(self.stats, gave_up_at=self.stats.passes)
        return step


def make_streams(lm, stale: list[int], length: int | None, give_up: GiveUpWhenSlow) -> SpeculativeStreams:
    """The strategy for one turn with `lm`'s own stream embeddings (a clear error without them)."""
    if lm is None:
        raise ForesayError("continuation 'streams' needs the model (make_continuation(..., lm=...))")
    return SpeculativeStreams(lm, stream_heads(lm), stale, length, give_up)


def check_streams_model(lm, length: int | None = None) -> None:
    """A clear error now rather than at the first reply: no stream embeddings, a server backend,
    a static cache, or a draft longer than the model's streams."""
    SpeculativeStreams(lm, stream_heads(lm), [], length)
