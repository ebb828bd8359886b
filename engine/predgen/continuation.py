"""How a reply continues after the final verification: continuation strategies.

The turn's draft state is the reply's tokens whose KV is cached after the prompt (`tokens`) and
the next token, known but not yet run through the model (`pending`). A strategy's `advance` runs
forward passes, returns the tokens it accepted (the old pending token first) and the new pending
token, and leaves the cache holding exactly prompt + tokens + accepted: PredGen's invariant. Every
strategy is lossless: the reply equals the model's own greedy decoding.

- `PlainSteps`: one token per forward pass.
- `JacobiFromDraft`: Jacobi iteration seeded with the stale draft. After a partial acceptance the
  rejected draft tail, shifted past the corrected token, is usually still right (the paper's
  Figure 2b); one pass over pending + guesses confirms the longest prefix of guesses that equals
  the model's argmax (their fixed point), accepts it plus the argmax after it, and replaces the
  remaining guesses with the pass's argmaxes (the Jacobi update).
- `SpecBound` (`specbound.py`): early-exit heads draft at shallow layers within a depth and a
  width bound; one pass over the remaining layers completes, verifies and extends the drafts.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from foresay.engine.errors import ForesayError
from foresay.engine.llm.cache import KVCache

KINDS = ("plain", "jacobi", "specbound", "streams")
# how each kind's spec reads after its name (the kinds' table, for help and errors)
SPEC_FORMS = {"plain": "plain", "jacobi": "jacobi, jacobi:W or jacobi:W:fill",
              "specbound": "specbound, specbound:W, specbound:W:L or specbound:W:L:P",
              "streams": "streams or streams:K"}


@dataclass(frozen=True)
class ContinuationConfig:
    """kind: plain | jacobi | specbound | streams (Speculative Streaming: needs a model with
        stream embeddings, e.g. demo-streams; `engine.predgen.streams`).
    window: jacobi: positions per pass, the pending token included (>= 2).
    width / depth / threshold: specbound: at most `width` draft tokens a round (W), drafted by
        exit heads at layers up to `depth` (L; None: the deepest head), a token exiting once its
        head's tempered top-1 probability reaches `threshold` (P); drafting also stops once the
        product of the round's exit probabilities (the heads' estimate that every draft so far is
        right) falls below `chain`.
    fill: jacobi: keep the window full past the end of the stale draft, guessing the unknown
        positions by repeating the last guess (pays off with a consistency-trained model, CLLM).
    patience / min_gain: jacobi, specbound and streams give up (plain steps for the rest of the
        turn) after `patience` passes in a row that each confirmed fewer than `min_gain` guessed
        tokens (0: never).
    draft: streams: draft tokens verified per pass, at most the model's stream count (0: all)."""
    kind: str = "plain"
    window: int = 16
    fill: bool = False
    patience: int = 3
    min_gain: int = 1
    width: int = 6
    depth: int | None = None
    threshold: float = 0.6
    chain: float = 0.3
    draft: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ForesayError(f"unknown continuation {self.kind!r}: use {' or '.join(KINDS)}")
        if self.window < 2:
            raise ForesayError("continuation: the Jacobi window needs at least 2 positions")
        if self.patience < 0 or self.min_gain < 0:
            raise ForesayError("continuation: patience and min_gain must be >= 0")
        if self.width < 1 or (self.depth is not None and self.depth < 1):
            raise ForesayError("continuation: the SpecBound width W and depth L must be >= 1")
        if not 0 <= self.chain < 1:
            raise ForesayError("continuation: the SpecBound chain floor must be in [0, 1)")
        if not 0 < self.threshold <= 1:
            raise ForesayError("continuation: the SpecBound exit threshold P must be in (0, 1]")
        if self.draft < 0:
            raise ForesayError("continuation: the streams' draft length must be >= 0")

    @classmethod
    def parse(cls, spec: str) -> "ContinuationConfig":
        """"plain", "jacobi", "jacobi:W" (window W), "jacobi:W:fill" or "jacobi::fill";
        "specbound", "specbound:W" (width W), "specbound:W:L" (depth L), "specbound:W:L:P"
        (exit threshold P; an empty option keeps its default: "specbound::2"); "streams" or
        "streams:K" (K draft tokens per pass)."""
        kind, *opts = spec.strip().split(":")
        if kind == "specbound":
            return cls._parse_specbound(spec, opts)
        if kind == "streams":
            if len(opts) > 1 or (opts and not (opts[0].isdigit() and int(opts[0]) >= 1)):
                raise ForesayError(f"bad continuation {spec!r}: write streams or streams:K (K >= 1 draft tokens)")
            return cls("streams", draft=int(opts[0]) if opts else 0)
        if kind not in KINDS or (kind == "plain" and opts) or len(opts) > 2:
            raise ForesayError(f"bad continuation {spec!r}: write "
                               + "; ".join(SPEC_FORMS.values()))
        fields = {}
        if opts and opts[0]:
            if not opts[0].isdigit():
                raise ForesayError(f"bad continuation {spec!r}: the window W must be a whole number")
            fields["window"] = int(opts[0])
        if len(opts) == 2:
            if opts[1] != "fill":
                raise ForesayError(f"bad continuation {spec!r}: the only option after the window is fill")
            fields["fill"] = True
        return cls(kind, **fields)

    @classmethod
    def _parse_specbound(cls, spec: str, opts: list[str]) -> "ContinuationConfig":
        if len(opts) > 3:
            raise ForesayError(f"bad continuation {spec!r}: write {SPEC_FORMS['specbound']}")
        fields: dict = {}
        for name, text in zip(("width", "depth"), opts[:2]):
            if text and not text.isdigit():
                raise ForesayError(f"bad continuation {spec!r}: the {name} must be a whole number")
            if text:
                fields[name] = int(text)
        if len(opts) == 3 and opts[2]:
            try:
                fields["threshold"] = float(opts[2])
            except ValueError:
                raise ForesayError(f"bad continuation {spec!r}: the exit threshold P must be a number "
                                   f"in (0, 1]") from None
        return cls("specbound", **fields)

    @property
    def spec(self) -> str:
        if self.kind == "plain":
            return "plain"
        if self.kind == "specbound":
            return f"specbound:{self.width}:{self.depth or ''}:{self.threshold:g}"
        if self.kind == "streams":
            return f"streams:{self.draft}" if self.draft else "streams"
        return f"jacobi:{self.window}" + (":fill" if self.fill else "")


@dataclass(frozen=True)
class Advance:
    """One `advance`: what it accepted and what it cost."""
    accepted: tuple[int, ...]  # now cached after the earlier tokens; the old pending token first
    pending: int               # the next token: known, not yet cached
    passes: int                # forward passes
    computed: int              # positions run through the model
    guessed: int               # accepted tokens that came from a guess and were confirmed


@dataclass(frozen=True)
class ContinuationStats:
    """A strategy's totals over a turn; `gave_up_at`: passes done when Jacobi gave up."""
    strategy: str = "plain"
    passes: int = 0
    tokens: int = 0            # tokens accepted (each pass also fixes the next pending token)
    computed: int = 0
    guessed: int = 0
    gave_up_at: int | None = None

    def plus(self, step: Advance) -> "ContinuationStats":
        return replace(self, passes=self.passes + step.passes, tokens=self.tokens + len(step.accepted),
                       computed=self.computed + step.computed, guessed=self.guessed + step.guessed)

    @property
    def tokens_per_pass(self) -> float:
        return self.tokens / self.passes if self.passes else 0.0


class Continuation(Protocol):
    name: str
    stats: ContinuationStats

    def advance(self, cache: KVCache, tokens: list[int], pending: int, budget: int) -> Advance:
        """Accept `pending` and at most `budget - 1` tokens after it (so the draft, new pending
        token included, grows by at most `budget`); the cache holds prompt + `tokens` on entry and
        prompt + tokens + accepted after."""
        ...


def _check_entry(cache: KVCache, tokens: list[int], budget: int) -> None:
    if budget < 1:
        raise ForesayError("continuation: no token budget left")
    if cache.tokens[len(cache.tokens) - len(tokens):] != tokens:
        raise ForesayError("continuation: the cache does not end with the reply's tokens")


def plain_step(cache: KVCache, pending: int) -> Advance:
    """One forward pass over the pending token alone: it is accepted, its argmax is next."""
    logits = cache.append([pending], keep_logits=1)
    return Advance((pending,), int(logits[-1].argmax()), 1, 1, 0)


def confirmed_prefix(guesses: list[int], argmax: list[int], eos_ids) -> int:
    """How many leading guesses equal the model's argmax at their position (their fixed point;
    `argmax[i]` predicts `guesses[i]`), stopping before a confirmed end of message: the reply
    ends there, and the end becomes the next pending token."""
    confirmed = 0
    while confirmed < len(guesses) and guesses[confirmed] == argmax[confirmed]:
        confirmed += 1
    return next((i for i, t in enumerate(guesses[:confirmed]) if t in eos_ids), confirmed)


class PlainSteps:
    """One forward pass per token."""
    name = "plain"

    def __init__(self):
        self.stats = ContinuationStats("plain")

    def advance(self, cache: KVCache, tokens: list[int], pending: int, budget: int) -> Advance:
        _check_entry(cache, tokens, budget)
        step = plain_step(cache, pending)
        self.stats = self.stats.plus(step)
        return step


@dataclass(frozen=True)
class FixedWindow:
    """Which guesses go into a pass: up to `size - 1` after the pending token; with `fill`, the
    window stays full past the known guesses (the last guess, or the pending token, repeated)."""
    size: int = 16
    fill: bool = False

    def guesses(self, guess: list[int], pending: int, budget: int) -> list[int]:
        room = min(self.size - 1, budget - 1)
        chosen = guess[:room]
        if self.fill and len(chosen) < room:
            chosen = chosen + [chosen[-1] if chosen else pending] * (room - len(chosen))
        return chosen


@dataclass(frozen=True)
class GiveUpWhenSlow:
    """Plain steps from now on once `patience` passes in a row each confirmed fewer than
    `min_gain` guessed tokens (a window that converges slowly only costs compute)."""
    patience: int = 3
    min_gain: int = 1

    def give_up(self, gains: list[int]) -> bool:
        if self.patience == 0 or len(gains) < self.patience:
            return False
        return all(g < self.min_gain for g in gains[-self.patience:])


class JacobiFromDraft:
    """Jacobi iteration whose initial guess is the stale draft's tail (see the module notes)."""
    name = "jacobi"

    def __init__(self, guess: list[int], window: FixedWindow = FixedWindow(),
                 give_up: GiveUpWhenSlow = GiveUpWhenSlow()):
        self.guess = list(guess)
        self.window = window
        self.give_up = give_up
        self.gains: list[int] = []  # guessed tokens confirmed by each pass that ran guesses
        self.stats = ContinuationStats("jacobi")
        self._plain = False

    def advance(self, cache: KVCache, tokens: list[int], pending: int, budget: int) -> Advance:
        _check_entry(cache, tokens, budget)
        guesses = [] if self._plain else self.window.guesses(self.guess, pending, budget)
        if not guesses:
            self.guess = self.guess[1:]  # keep positions aligned: pending takes the first
            step = plain_step(cache, pending)
            self.stats = self.stats.plus(step)
            return step
        start = len(cache)
        argmax = cache.append([pending] + guesses).argmax(-1).tolist()  # row i predicts guesses[i]
        confirmed = confirmed_prefix(guesses, argmax, cache.lm.eos_ids)
        cache.crop(start + 1 + confirmed)
        self.guess = argmax[confirmed + 1:] + self.guess[len(guesses) + 1:]
        step = Advance((pending, *guesses[:confirmed]), argmax[confirmed], 1, 1 + len(guesses), confirmed)
        self.stats = self.stats.plus(step)
        self.gains.append(confirmed)
        if self.give_up.give_up(self.gains):
            self._plain = True
            self.stats = replace(self.stats, gave_up_at=self.stats.passes)
        return step
