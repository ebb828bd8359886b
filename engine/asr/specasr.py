"""SpecASR: a draft decoder proposes, the target decoder verifies; output equals target greedy.

Written once over `CacheCursor`s (`speculative_loop`): Whisper pairs (`speculative_decode`) and
LLM-based recognizer pairs (llm_backends.py) differ only in their cursor adapters.

One round: the draft proposes a chain (adaptive length: it stops after a token whose top-1
probability is below `threshold`, at `max_draft` tokens or at end-of-text), optionally first
re-checking a recycled tail in one parallel pass; with a tree budget, the draft's second-best
tokens at the least certain chain positions become short branches; the target scores the
pending tokens, the chain and the branches in one pass (ancestor-only mask) and walks down the
tree while its own greedy choice matches a child. Every token appended is the target's greedy
choice, so the result is the reference's token for token; drafts only decide how many target
passes that takes.

A draft that keeps missing (`backoff_after` rounds in a row with none of its tokens accepted: a
draft that does not know the audio's language or noise, or a random fixture) is paused for a
round, then two, four, ... (at most `MAX_PAUSE`), each pause followed by a probing round that
drafts one token; an accepted token ends the back-off. A paused round is one target step, as
greedy decoding takes, so a useless draft costs a few probing passes instead of one per token.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from foresay.engine.asr.captured import make_cursor
from foresay.engine.asr.cursor import CacheCursor
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.greedy import DecodeResult, DecodeStats, finish, pick, token_budget
from foresay.engine.asr.vocab import SuppressionRules

MAX_PAUSE = 16  # the longest back-off, in rounds without drafting


@dataclass(frozen=True)
class SpecConfig:
    """How the draft proposes; none of it changes the output, only its cost."""
    threshold: float = 0.4  # stop the chain after a token whose top-1 draft probability is below this (0: fixed length)
    max_draft: int = 24  # longest chain per round
    recycle: bool = True  # after a rejection, re-check the rejected tail in one draft pass instead of re-drafting it
    tree_budget: int = 0  # second-best branches added per round (0: chain only)
    branch_length: int = 2  # tokens per branch: the second-best token plus greedy draft continuations
    backoff_after: int = 2  # rounds in a row with no draft token accepted before drafting pauses (0: never)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise InvalidAsrConfig(f"draft threshold must be in [0, 1], got {self.threshold}")
        if not 1 <= self.max_draft <= 128:
            raise InvalidAsrConfig(f"max_draft must be in 1..128, got {self.max_draft}")
        if not 0 <= self.tree_budget <= 64:
            raise InvalidAsrConfig(f"tree_budget must be in 0..64, got {self.tree_budget}")
        if not 1 <= self.branch_length <= 16:
            raise InvalidAsrConfig(f"branch_length must be in 1..16, got {self.branch_length}")
        if not 0 <= self.backoff_after <= 64:
            raise InvalidAsrConfig(f"backoff_after must be in 0..64, got {self.backoff_after}")


@dataclass
class _Chain:
    """The draft's proposal: tokens, their top-1 probabilities and the runner-up tokens."""
    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    seconds: list[int] = field(default_factory=list)
    recycled: int = 0


@dataclass
class _Tree:
    """Verification tree: pending tokens, then the chain, then branches; node -> parent."""
    tokens: list[int]
    parents: list[int]
    last_pending: int
    children: dict[int, list[int]] = field(default_factory=dict)

    def add(self, token: int, parent: int) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        node = len(self.tokens) - 1
        self.children.setdefault(parent, []).append(node)
        return node

    def line_after(self, node: int) -> list[int]:
        """Tokens down the first-child line below `node`."""
        out = []
        while self.children.get(node):
            node = self.children[node][0]
            out.append(self.tokens[node])
        return out


def _top2(rows: torch.Tensor) -> tuple[list[int], list[float], list[int]]:
    probs = torch.softmax(rows, dim=-1)
    top = torch.topk(probs, 2, dim=-1)
    return top.indices[:, 0].tolist(), top.values[:, 0].tolist(), top.indices[:, 1].tolist()


def draft_chain(draft: CacheCursor, sequence: list[int], start: int, room: int, recycled: Sequence[int],
                config: SpecConfig, rules: SuppressionRules, eot: int) -> _Chain:
    """The draft's greedy chain after `sequence` (at most `room` tokens). `recycled` tokens are
    checked in the first pass; the chain is what token-by-token drafting would give, at the
    cost of fewer draft passes when the recycled tokens hold."""
    chain = _Chain()
    guess = list(recycled) if config.recycle else []
    while len(chain.tokens) < room:
        context = sequence + chain.tokens
        pending = draft.sync(context)
        guess = guess[: room - len(chain.tokens) - 1]
        logits = draft.extend(pending + guess)[len(pending) - 1:]
        positions = torch.arange(len(context) - 1, len(context) + len(guess))
        best, prob, second = _top2(pick(logits, positions, start, rules))
        for row in range(len(best)):
            chain.tokens.append(best[row])
            chain.probs.append(prob[row])
            chain.seconds.append(second[row])
            if best[row] == eot or prob[row] < config.threshold or len(chain.tokens) >= room:
                return chain
            if row < len(guess):
                if guess[row] != best[row]:
                    break
                chain.recycled += 1
        guess = []
    return chain


def _branches(draft: CacheCursor, sequence: list[int], start: int, chain: _Chain, room: int,
              config: SpecConfig, rules: SuppressionRules, eot: int) -> dict[int, list[int]]:
    """Second-best branches at the least certain chain positions, each extended greedily by
    the draft; one draft pass per extension step covers all branches (a tree pass). A branch
    never reaches past `room` tokens after `sequence` (the most one round can accept)."""
    uncertain = sorted(range(len(chain.tokens)), key=lambda i: chain.probs[i])[: config.tree_budget]
    branches = {i: [chain.seconds[i]] for i in sorted(uncertain)}
    draft.sync(sequence + chain.tokens)
    for _ in range(config.branch_length - 1):
        growing = [i for i, b in branches.items() if b[-1] != eot and i + len(b) < room]
        if not growing:
            break
        tokens, parents, context, tips = [], [], [], []
        for i in growing:
            for depth, token in enumerate(branches[i]):
                tokens.append(token)
                parents.append(len(tokens) - 2 if depth else -1)
                context.append(len(sequence) + i)
            tips.append(len(tokens) - 1)
        logits, positions = draft.tree(tokens, parents, context)
        draft.drop_tree()
        best = pick(logits[tips], positions[tips], start, rules).argmax(-1).tolist()
        for i, token in zip(growing, best):
            branches[i].append(token)
    return branches


def speculative_decode(target, draft, target_encoder_out: torch.Tensor, draft_encoder_out: torch.Tensor,
                       prefix: Sequence[int], rules: SuppressionRules, eot: int,
                       config: SpecConfig = SpecConfig(), max_new_tokens: int = 224,
                       recycled: Sequence[int] = ()) -> DecodeResult:
    """Greedy decoding of Whisper `target` after `prefix`, sped up by Whisper `draft`.
    `recycled` is a first guess of the continuation (e.g. the previous hop's unconfirmed tail)."""
    return speculative_loop(make_cursor(target, target_encoder_out), make_cursor(draft, draft_encoder_out),
                            prefix, rules, eot, config, max_new_tokens, recycled)


def speculative_loop(verifier: CacheCursor, drafter: CacheCursor, prefix: Sequence[int], rules, eot: int,
                     config: SpecConfig = SpecConfig(), max_new_tokens: int = 224,
                     recycled: Sequence[int] = ()) -> DecodeResult:
    """Greedy decoding of the decoder behind `verifier` after `prefix`, sped up by `drafter`
    (a decoder of the same vocabulary over the same audio); any pair of `CacheCursor`s."""
    budget = token_budget(prefix, max_new_tokens, min(verifier.max_positions, drafter.max_positions))
    start = len(prefix)
    sequence = list(prefix)
    generated: list[int] = []
    accepted, lengths, sizes = [], [], []
    recycled_total = 0
    guess = list(recycled)
    backoff = _Backoff(config.backoff_after)
    while len(generated) < budget and not (generated and generated[-1] == eot):
        room = min(config.max_draft, budget - len(generated) - 1)  # the target adds one token of its own
        room = backoff.room(room)
        chain = draft_chain(drafter, sequence, start, room, guess, config, rules, eot) if room else _Chain()
        recycled_total += chain.recycled
        branches = (_branches(drafter, sequence, start, chain, room, config, rules, eot)
                    if config.tree_budget and chain.tokens else {})
        tree = _build_tree(verifier.sync(sequence), chain.tokens, branches)
        logits, positions = verifier.tree(tree.tokens, tree.parents, [len(verifier.cached)] * len(tree.tokens))
        choice = pick(logits, positions, start, rules).argmax(-1).tolist()
        new_tokens, path, guess = _walk(tree, choice, budget - len(generated), eot)
        generated += new_tokens
        sequence += new_tokens
        verifier.keep_path([*range(tree.last_pending + 1), *path])
        accepted.append(len(path))
        lengths.append(len(chain.tokens))
        if chain.tokens:
            backoff.record(hit=bool(path))
        sizes.append(len(tree.tokens) - tree.last_pending - 1)
    stats = DecodeStats(target_passes=verifier.passes, draft_passes=drafter.passes,
                        accepted_per_round=tuple(accepted), draft_lengths=tuple(lengths),
                        tree_sizes=tuple(sizes), recycled=recycled_total)
    return finish(generated, eot, stats)


class _Backoff:
    """How much to draft: after `after` missed rounds in a row, nothing for 1, 2, 4, ... rounds,
    each pause followed by a one-token probe."""

    def __init__(self, after: int):
        self.after, self.misses, self.pause, self.next_pause = after, 0, 0, 1

    def room(self, room: int) -> int:
        if self.pause:
            self.pause -= 1
            return 0
        return min(room, 1) if self.backing_off else room

    @property
    def backing_off(self) -> bool:
        return bool(self.after) and self.misses >= self.after

    def record(self, hit: bool) -> None:
        if hit:
            self.misses, self.next_pause = 0, 1
            return
        self.misses += 1
        if self.backing_off:
            self.pause, self.next_pause = self.next_pause, min(2 * self.next_pause, MAX_PAUSE)


def _walk(tree: _Tree, choice: list[int], room: int, eot: int) -> tuple[list[int], list[int], list[int]]:
    """Follow the target's greedy choices down the tree from the last pending token: returns the
    tokens it appends (each accepted draft token plus the target's own next token), the tree
    nodes accepted on the way, and the rejected line's tail to recycle."""
    tokens, path, node = [], [], tree.last_pending
    while True:
        token = choice[node]
        tokens.append(token)
        if token == eot or len(tokens) >= room:
            return tokens, path, []
        match = [c for c in tree.children.get(node, []) if tree.tokens[c] == token]
        if not match:
            rejected = tree.children.get(node, [])
            return tokens, path, tree.line_after(rejected[0]) if rejected else []
        node = match[0]
        path.append(node)


def _build_tree(pending: list[int], chain: list[int], branches: dict[int, list[int]]) -> _Tree:
    tree = _Tree(tokens=[], parents=[], last_pending=len(pending) - 1)
    for i, token in enumerate(pending):
        tree.add(token, i - 1)
    chain_nodes = []
    for token in chain:
        chain_nodes.append(tree.add(token, chain_nodes[-1] if chain_nodes else tree.last_pending))
    for position, branch in branches.items():
        parent = chain_nodes[position - 1] if position else tree.last_pending
        for token in branch:
            parent = tree.add(token, parent)
    return tree
