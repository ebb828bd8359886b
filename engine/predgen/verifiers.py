"""Draft verifiers: how many tokens of a draft survive a newer prompt.

Each takes the logits of one forward pass over the new prompt tail plus the draft (row i predicts
draft token i) and returns how many leading draft tokens to keep. Kept tokens are the draft's own
tokens, never replaced by the argmax; the token after them is chosen greedily by the caller.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.model import ChatLM


@dataclass(frozen=True)
class VerifyInput:
    draft: list[int]
    logits: torch.Tensor  # [len(draft) + 1, vocab]; row i predicts draft[i]
    user_text: str
    first_sentence: str | None         # the draft's first complete sentence, if it has one
    first_sentence_tokens: int | None  # how many draft tokens it takes


class Verifier(Protocol):
    name: str

    def accept(self, inp: VerifyInput) -> int: ...


def greedy_prefix(draft: list[int], logits: torch.Tensor) -> int:
    """Length of the longest prefix of `draft` that equals the argmax of `logits` row by row."""
    if not draft:
        return 0
    argmax = logits[:len(draft)].argmax(-1).tolist()
    for i, (want, got) in enumerate(zip(draft, argmax)):
        if want != got:
            return i
    return len(draft)


class GreedyVerifier:
    """Lossless: keeps exactly the tokens greedy decoding of the new prompt would produce."""
    name = "greedy"

    def accept(self, inp: VerifyInput) -> int:
        return greedy_prefix(inp.draft, inp.logits)


class TopKVerifier:
    """Keeps draft tokens while each is among the k most likely at its position (lossy)."""

    def __init__(self, k: int):
        if k < 1:
            raise ForesayError(f"top-k verification needs k >= 1, got {k}")
        self.k = k
        self.name = f"topk:{k}"

    def accept(self, inp: VerifyInput) -> int:
        if not inp.draft:
            return 0
        top = inp.logits[:len(inp.draft)].topk(min(self.k, inp.logits.shape[-1]), dim=-1).indices
        draft = torch.tensor(inp.draft, device=top.device).unsqueeze(-1)
        hits = (top == draft).any(-1).tolist()
        return next((i for i, hit in enumerate(hits) if not hit), len(hits))


JUDGE_SYSTEM = "You check the drafts of a voice assistant. Answer with one word: yes or no."
JUDGE_USER = ("The user is still speaking. Their words so far: \"{partial}\"\n"
              "The assistant's reply would begin: \"{sentence}\"\n"
              "Does this first sentence still fit what the user is saying?")


class ReflectionJudge:
    """Asks the model itself whether a first sentence fits a partial prompt (yes/no likelihood).

    It keeps its own KV cache, so the judge prompt's fixed prefix is computed once.
    """

    def __init__(self, lm: ChatLM, threshold: float = 0.5):
        self.lm = lm
        self.threshold = threshold
        self.cache = lm.kv_cache()
        yes = self._first_ids(("yes", "Yes", " yes", " Yes"))
        no = self._first_ids(("no", "No", " no", " No"))
        self.yes_ids, self.no_ids = yes - no, no - yes  # a shared first piece says nothing
        if not self.yes_ids or not self.no_ids:
            raise ForesayError("the model's tokenizer has no distinct yes/no tokens for reflection")

    def _first_ids(self, words) -> set[int]:
        return {ids[0] for ids in (self.lm.encode(w) for w in words) if ids}

    def p_yes(self, partial: str, sentence: str) -> float:
        messages = [{"role": "system", "content": JUDGE_SYSTEM},
                    {"role": "user", "content": JUDGE_USER.format(partial=partial, sentence=sentence)}]
        ids = self.lm.encode(self.lm.render(messages, add_generation_prompt=True))
        _, logits = self.cache.sync(ids)
        logp = torch.log_softmax(logits[-1], -1)
        yes = torch.logsumexp(logp[list(self.yes_ids)], 0).item()
        no = torch.logsumexp(logp[list(self.no_ids)], 0).item()
        return 1.0 / (1.0 + math.exp(no - yes))


class ReflectionVerifier:
    """Keeps the draft's first sentence when the judge says it fits the new prompt; the tokens
    after it, and every token when the judge says no or there is no sentence yet, are verified
    greedily."""
    name = "reflection"

    def __init__(self, judge: ReflectionJudge):
        self.judge = judge
        self.last_p_yes: float | None = None

    def accept(self, inp: VerifyInput) -> int:
        self.last_p_yes = None
        n = inp.first_sentence_tokens
        if not n or not inp.first_sentence:
            return greedy_prefix(inp.draft, inp.logits)
        self.last_p_yes = self.judge.p_yes(inp.user_text, inp.first_sentence)
        if self.last_p_yes < self.judge.threshold:
            return greedy_prefix(inp.draft, inp.logits)
        return n + greedy_prefix(inp.draft[n:], inp.logits[n:])


def parse_verifier(spec: str) -> tuple[str, int | None]:
    """("greedy", None), ("topk", K) or ("reflection", None) from "greedy", "topk:K" or
    "reflection"; the one place these names are read."""
    if spec in ("greedy", "reflection"):
        return spec, None
    kind, _, k = spec.partition(":")
    if kind == "topk" and k.isdigit() and int(k) >= 1:
        return "topk", int(k)
    raise ForesayError(f"verifier must be greedy, topk:K (a whole number K >= 1) or reflection, got {spec!r}")


def make_verifier(spec: str, lm: ChatLM) -> Verifier:
    """"greedy", "topk:K" or "reflection"."""
    kind, k = parse_verifier(spec)
    if kind == "topk":
        return TopKVerifier(k)
    if kind == "reflection":
        return ReflectionVerifier(ReflectionJudge(lm))
    return GreedyVerifier()
