"""SpecBound (Wen and Feng): bounded early-exit self-drafting as a PredGen continuation.

One `advance` is a round:

1. Draft. The pending token runs up the decoder one layer at a time; at each exit layer up to the
   depth bound L, that layer's exit head (`exit_heads`) proposes a token with a tempered
   probability. The first proposal that reaches the threshold exits: it is the next draft token,
   and it starts up the decoder in turn. A token that has not exited by layer L stops drafting, and
   so does the width bound W (at most W draft tokens a round) or an end-of-message draft.
2. Complete and verify in one pass. Every drafted position holds its states up to the layer where
   it stopped (a later, deeper-going token first brings the earlier positions it attends to up to
   its layer: each position is computed once per layer, never again). The remaining layers then
   run over all of them together, layer by layer from the shallowest state left; the model's own
   LM head on the last layer confirms the longest prefix of drafts that equals its argmax and
   gives the token after it (the new pending token).
3. Keep the invariant. Every layer's cache is cut back to prompt + accepted tokens: the states of
   rejected drafts go from every layer.

Lossless by construction: a draft token is accepted only where the full model's argmax, computed
from accepted tokens only, equals it; the heads change how much is drafted, never what is kept.
The worst case (every draft rejected) costs the round's draft steps on top of one step; after
`patience` drafting rounds in a row that confirm fewer than `min_gain` drafts, the turn goes on
in plain steps, so the loss over plain decoding is bounded. (A round in which no token exits
costs about one plain step plus the heads' products: it never counts towards giving up.)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.predgen.continuation import (Advance, ContinuationStats, GiveUpWhenSlow, _check_entry,
                                                 confirmed_prefix, plain_step)
from foresay.engine.predgen.exit_heads import ExitHeads
from foresay.engine.predgen.layerwise import LayerwiseModel


@dataclass(frozen=True)
class Bounds:
    """width: W, the most draft tokens a round proposes. depth: L, the deepest layer a draft token
    may exit at (None: the deepest exit head). threshold: a head's tempered top-1 probability at
    which a token exits. chain: drafting stops once the product of the round's exit
    probabilities (the chance that every draft so far is right, as calibrated heads see it)
    falls below it (0: never)."""
    width: int = 6
    depth: int | None = None
    threshold: float = 0.6
    chain: float = 0.0

    def __post_init__(self):
        if self.width < 1:
            raise ForesayError("SpecBound: the width bound W must be >= 1")
        if self.depth is not None and self.depth < 1:
            raise ForesayError("SpecBound: the depth bound L must be >= 1")
        if not 0 < self.threshold <= 1:
            raise ForesayError("SpecBound: the exit threshold must be in (0, 1]")
        if not 0 <= self.chain < 1:
            raise ForesayError("SpecBound: the chain floor must be in [0, 1)")


@dataclass(frozen=True)
class SpecBoundStats:
    """A turn's drafting: rounds (one completion pass each), draft tokens proposed and confirmed,
    draft steps (partial passes), where drafts exited, why drafting stopped, and the work done
    in (position, layer) pairs."""
    rounds: int = 0
    drafted: int = 0
    confirmed: int = 0
    draft_steps: int = 0
    exits: tuple[tuple[int, int], ...] = ()     # (exit layer, draft tokens that exited there)
    stopped_by_depth: int = 0
    stopped_by_width: int = 0
    stopped_by_chain: int = 0
    layer_positions: int = 0

    @property
    def acceptance(self) -> float:
        """Share of draft tokens the model confirmed."""
        return self.confirmed / self.drafted if self.drafted else 0.0

    @property
    def mean_draft(self) -> float:
        return self.drafted / self.rounds if self.rounds else 0.0


class _Frontier:
    """The round's positions (pending + drafts) whose states are not yet through every layer:
    each one's hidden state and depth (layers it has been through; never rising along positions,
    so the positions needing a layer are always a suffix)."""

    def __init__(self, runner: LayerwiseModel, cache, base: int, room: int):
        self.runner, self.cache, self.base = runner, cache, base
        self.rotary = (base, *runner.rotary(base, room))  # every position the round may hold
        self.tokens: list[int] = []
        self.hidden: list[torch.Tensor] = []
        self.depth: list[int] = []
        self.work = 0

    def add(self, token: int) -> None:
        self.tokens.append(token)
        self.hidden.append(self.runner.embed([token]))
        self.depth.append(0)

    def raise_to(self, target: int) -> None:
        """Bring every position to at least `target` layers, one layer at a time."""
        while self.depth[-1] < target:
            layer = self.depth[-1]
            s = self.depth.index(layer)
            out = self.runner.run_layer(self.cache, layer, torch.cat(self.hidden[s:], dim=1), self.base + s,
                                        self.rotary)
            for k in range(s, len(self.tokens)):
                self.hidden[k] = out[:, k - s:k - s + 1]
                self.depth[k] = layer + 1
            self.work += len(self.tokens) - s

    def final_argmax(self) -> list[int]:
        return self.runner.logits(torch.cat(self.hidden, dim=1)).argmax(-1).tolist()


class SpecBound:
    """The continuation strategy (see the module notes)."""
    name = "specbound"

    def __init__(self, lm, heads: ExitHeads, bounds: Bounds = Bounds(),
                 give_up: GiveUpWhenSlow = GiveUpWhenSlow()):
        self.lm = lm
        self.runner = LayerwiseModel(lm)
        self.heads = heads
        self.bounds = bounds
        depth = heads.exit_layers[-1] if bounds.depth is None else bounds.depth
        self.exits = [(i, e) for i, e in enumerate(heads.exit_layers) if e <= depth]
        if not self.exits:
            raise ForesayError(f"SpecBound: no exit head at or before the depth bound L={depth} "
                               f"(the heads exit after layers {', '.join(map(str, heads.exit_layers))})")
        self.give_up = give_up
        self.gains: list[int] = []
        self.stats = ContinuationStats("specbound")
        self.bound = SpecBoundStats()
        self._plain = False

    @torch.inference_mode()
    def advance(self, cache, tokens: list[int], pending: int, budget: int) -> Advance:
        _check_entry(cache, tokens, budget)
        if self._plain:
            return self._done(plain_step(cache, pending))
        base = len(cache)
        if any(layer.get_seq_length() != base for layer in self.runner.cache_layers(cache)):
            raise ForesayError("SpecBound: the cache's layers do not all hold the conversation")
        width = min(self.bounds.width, budget - 1)
        frontier = _Frontier(self.runner, cache, base, width + 1)
        frontier.add(pending)
        drafted, exits, stop = self._draft(frontier, width)
        with self.lm.counted_pass(len(frontier.tokens)):
            frontier.raise_to(self.runner.n_layers)
            argmax = frontier.final_argmax()
        confirmed = confirmed_prefix(drafted, argmax, self.lm.eos_ids)
        cache.tokens.extend(frontier.tokens)
        cache.crop(base + 1 + confirmed)  # rejected drafts leave every layer
        counts = dict(self.bound.exits)
        for e in exits:
            counts[e] = counts.get(e, 0) + 1
        b = self.bound
        self.bound = replace(b, rounds=b.rounds + 1, drafted=b.drafted + len(drafted),
                             confirmed=b.confirmed + confirmed, draft_steps=b.draft_steps + len(exits)
                             + (stop == "depth"), exits=tuple(sorted(counts.items())),
                             stopped_by_depth=b.stopped_by_depth + (stop == "depth"),
                             stopped_by_width=b.stopped_by_width + (stop == "width"),
                             stopped_by_chain=b.stopped_by_chain + (stop == "chain"),
                             layer_positions=b.layer_positions + frontier.work)
        step = Advance((pending, *drafted[:confirmed]), argmax[confirmed], len(exits) + (stop == "depth") + 1,
                       len(frontier.tokens), confirmed)
        if drafted:  # a round without drafts costs about a plain step: it never counts as slow
            self.gains.append(confirmed)
            if self.give_up.give_up(self.gains):
                self._plain = True
                self.stats = replace(self.stats, gave_up_at=self.stats.passes + step.passes)
        return self._done(step)

    def _draft(self, frontier: _Frontier, width: int) -> tuple[list[int], list[int], str | None]:
        """Draft up to `width` tokens after the frontier's pending token: (drafts, the exit layer
        of each, why drafting stopped: "depth", "width", "chain", "end", or None when no draft was
        allowed)."""
        drafted: list[int] = []
        exits: list[int] = []
        chain = 1.0
        while len(drafted) < width:
            token = None
            with self.lm.counted_pass(1):
                for i, layer in self.exits:
                    frontier.raise_to(layer)
                    candidate, p = self.heads.confidence(i, frontier.hidden[-1])
                    if p >= self.bounds.threshold:
                        chain *= p
                        token = candidate
                        exits.append(layer)
                        break
            if token is None:
                return drafted, exits, "depth"
            drafted.append(token)
            frontier.add(token)
            if token in self.lm.eos_ids:
                return drafted, exits, "end"
            if chain < self.bounds.chain:
                return drafted, exits, "chain"
        return drafted, exits, "width" if width else None

    def _done(self, step: Advance) -> Advance:
        self.stats = self.stats.plus(step)
        return step
