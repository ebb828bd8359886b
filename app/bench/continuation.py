"""`foresay bench predgen --continuation ...`: choosing the continuation, and what it is measured by.

Three pieces the PredGen benchmark uses: the table of continuation names the option accepts, the
figures of turns whose first sentence the final verification did not confirm (wall time to the
first sentence, SpecBound's drafting), and SpecBound's worst case (every draft rejected) timed
against plain steps.
"""
from __future__ import annotations

import statistics
import time

from foresay.engine.errors import ForesayError

# --continuation NAME[:OPTIONS] -> the continuation spec (engine.predgen.continuation)
CONTINUATIONS = {
    "ar": "plain",            # one token per forward pass
    "jacobi": "jacobi",       # Jacobi iteration seeded with the stale draft
    "specbound": "specbound",  # early-exit self-drafting (exit heads beside the model)
    "streams": "streams",      # Speculative Streaming (a model with stream embeddings: demo-streams)
}


def continuation_spec(option: str) -> str:
    """The spec of `--continuation` (e.g. "ar" -> "plain", "specbound:4:2" -> itself)."""
    name, colon, rest = option.strip().partition(":")
    if name not in CONTINUATIONS:
        raise ForesayError(f"--continuation {option!r}: use one of {', '.join(CONTINUATIONS)} "
                           "(options after a colon, e.g. specbound:6:2)")
    return CONTINUATIONS[name] + colon + rest


def apply_continuation(methods: list[str], option: str | None) -> list[str]:
    """Methods without their own continuation ("greedy", "topk:3") get `option`'s."""
    if not option:
        return methods
    spec = continuation_spec(option)
    return [m if m == "baseline" or "+" in m or m.startswith("jacobi") else f"{m}+{spec}" for m in methods]


BEST_CASE = "@best"


def best_case_methods(methods: list[str]) -> list[str]:
    """The best-case twin (`ReplyOracle` heads) of every greedy method with the specbound
    continuation; refuses a list with none (the oracle knows only the greedy reply)."""
    twins = []
    for method in methods:
        verifier, _, continuation = method.partition("+")
        if verifier == "greedy" and continuation.startswith("specbound") and not method.endswith(BEST_CASE):
            twins.append(method + BEST_CASE)
    if not twins:
        raise ForesayError("--best-case needs a greedy method with the specbound continuation "
                           "(e.g. --methods greedy+plain,greedy+specbound)")
    return twins


def missed_summary(missed) -> dict:
    """Turns the final verification did not finish (partial, rejected): time to the first
    sentence, and SpecBound's drafting over those turns' whole replies."""
    out: dict = {}
    if missed:
        ttfs = [1000 * r.ttfs for r in missed]
        out.update(ttfs_missed_ms=statistics.fmean(ttfs), ttfs_missed_median_ms=statistics.median(ttfs))
    drafting = [r.drafting for r in missed if getattr(r, "drafting", None) is not None]
    if drafting:
        drafted = sum(d.drafted for d in drafting)
        rounds = sum(d.rounds for d in drafting)
        exits: dict[int, int] = {}
        for d in drafting:
            for layer, n in d.exits:
                exits[layer] = exits.get(layer, 0) + n
        out["specbound"] = {
            "rounds": rounds, "drafted": drafted, "confirmed": sum(d.confirmed for d in drafting),
            "acceptance": sum(d.confirmed for d in drafting) / drafted if drafted else 0.0,
            "mean_draft": drafted / rounds if rounds else 0.0,
            "tokens_per_round": (sum(d.confirmed for d in drafting) + rounds) / rounds if rounds else 0.0,
            "exits": {str(k): v for k, v in sorted(exits.items())},
            "stopped_by_depth": sum(d.stopped_by_depth for d in drafting),
            "stopped_by_width": sum(d.stopped_by_width for d in drafting),
            "stopped_by_chain": sum(d.stopped_by_chain for d in drafting)}
    return out


def paired_ttfs_ratio(results: dict, reference: str, method: str) -> float | None:
    """Median over the turns both methods missed of reference TTFS / method TTFS."""
    ratios = []
    for conv_ref, conv_m in zip(results[reference], results[method]):
        for a, b in zip(conv_ref, conv_m):
            if a.outcome in ("partial", "rejected") and b.outcome == a.outcome and b.ttfs > 0:
                ratios.append(a.ttfs / b.ttfs)
    return statistics.median(ratios) if ratios else None


class _AlwaysWrong:
    """Exit heads that exit at once, sure of a token the model never chooses in this reply."""

    def __init__(self, heads, wrong: int):
        self.exit_layers, self.temperatures, self.wrong = heads.exit_layers, heads.temperatures, wrong

    def confidence(self, i, hidden):
        return self.wrong, 1.0


class ReplyOracle:
    """Exit heads that know the model's own reply: at every draft position they propose the
    model's next token at the first exit, with certainty, after computing the real head there (so
    a draft costs what a real first-exit draft costs). SpecBound's best case (every draft right,
    every one as cheap as it can be): the ceiling of what drafting can save on this model and
    machine. `bind` names the cache the reply is decoded into and the prompt's length."""

    def __init__(self, heads, reply: list[int], end: int):
        self.heads = heads
        self.exit_layers, self.temperatures = heads.exit_layers, heads.temperatures
        self.reply, self.end = list(reply), end
        self.cache, self.prompt_length = None, 0

    def bind(self, cache, prompt_length: int) -> "ReplyOracle":
        self.cache, self.prompt_length = cache, prompt_length
        return self

    def confidence(self, i, hidden):
        self.heads.confidence(i, hidden)  # its cost, not its answer
        # the first layer holds every position drafted so far: the newest is reply[at - 1]
        at = self.cache._cache.layers[0].get_seq_length() - self.prompt_length
        return (self.reply[at] if at < len(self.reply) else self.end), 1.0


def specbound_best_case(reply: list[int], cache, prompt_length: int):
    """A continuation factory for `PredGenTurn`: the specbound continuation with `ReplyOracle`
    heads that know `reply` (the turn's cache holds the prompt's `prompt_length` tokens first)."""
    from foresay.engine.predgen.strategies import make_continuation

    def factory(config, stale, lm):
        strategy = make_continuation(config, stale, lm)
        strategy.heads = ReplyOracle(strategy.heads, reply, min(lm.eos_ids)).bind(cache, prompt_length)
        return strategy
    return factory


def _decode(strategy, cache, pending: int, tokens: int, one_by_one: bool = False) -> list[int]:
    """`tokens` tokens from `pending` on, or to the end of the reply; `one_by_one`: a budget of one token per advance (SpecBound
    then drafts nothing: a plain step through its layer-by-layer pass)."""
    done: list[int] = []
    while len(done) + 1 < tokens and pending not in cache.lm.eos_ids:
        step = strategy.advance(cache, done, pending, 1 if one_by_one else tokens - len(done) - 1)
        done += step.accepted
        pending = step.pending
    return done + [pending]


VARIANTS = ("plain", "layerwise_plain", "specbound", "best", "worst_never_gives_up", "worst_gives_up")


def measure_continuation_cost(lm, prompts: list[str], spec: str, tokens: int = 32, repeats: int = 5) -> dict:
    """Time to decode the reply (at most `tokens` tokens) to each prompt, as a ratio to plain steps (medians over
    prompts of per-prompt medians; variants interleaved, so a slow spell hits them alike):
    - layerwise_plain: one token per pass through SpecBound's layer-by-layer pass (no drafting):
      how much of a gain is the leaner pass rather than the drafting;
    - specbound: as configured, with the model's heads;
    - best: every draft right, at the first exit (`ReplyOracle`): the most drafting can save;
    - worst_*: every draft wrong (a token absent from the reply, proposed with certainty at the
      first exit), never giving up (the cost of one rejected round, round after round) and with
      the configured give-up (what a turn of wrong drafts costs at most)."""
    from dataclasses import replace

    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    from foresay.engine.predgen.continuation import ContinuationConfig, PlainSteps
    from foresay.engine.predgen.strategies import make_continuation
    from foresay.engine.predgen.conversation import Conversation

    config = ContinuationConfig.parse(spec)
    if config.kind != "specbound":
        raise ForesayError("the continuation cost is measured for the specbound continuation")
    ratios: dict[str, list[float]] = {n: [] for n in VARIANTS[1:]}
    passes: dict[str, list[int]] = {n: [] for n in VARIANTS}
    for text in prompts:
        prompt = list(Conversation(lm).prompt(text).ids)
        times: dict[str, list[float]] = {n: [] for n in VARIANTS}
        reply: list[int] | None = None
        for _ in range(repeats):
            for name in VARIANTS:
                cache = DynamicKVCache(lm)
                _, logits = cache.sync(prompt)
                if name == "plain":
                    strategy = PlainSteps()
                else:
                    patience = 0 if name == "worst_never_gives_up" else config.patience
                    strategy = make_continuation(replace(config, patience=patience), [], lm)
                if name.startswith("worst"):
                    wrong = next(t for t in range(lm.model.config.vocab_size)
                                 if t not in reply and t not in lm.eos_ids)
                    strategy.heads = _AlwaysWrong(strategy.heads, wrong)
                if name == "best":
                    strategy.heads = ReplyOracle(strategy.heads, reply, min(lm.eos_ids)).bind(cache, len(prompt))
                start = time.perf_counter()
                out = _decode(strategy, cache, int(logits[-1].argmax()), tokens, name == "layerwise_plain")
                times[name].append(time.perf_counter() - start)
                if reply is None:
                    reply = out
                elif out != reply:
                    raise ForesayError(f"continuation cost: {name} decoded another reply than plain steps")
                passes[name].append(strategy.stats.passes)
        plain = statistics.median(times["plain"])
        for name in ratios:
            ratios[name].append(statistics.median(times[name]) / plain)
    return {"prompts": len(prompts), "tokens": tokens, "repeats": repeats, "spec": spec,
            "time_vs_plain": {n: statistics.median(r) for n, r in ratios.items()},
            "passes_per_reply": {n: statistics.fmean(p) for n, p in passes.items()}}
