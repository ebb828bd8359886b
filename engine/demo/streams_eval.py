"""Measure the Speculative Streaming continuation against plain steps on held-out requests.

Each request of the held-out split is first drafted from a cut-off version of it (1 to 3 words
dropped, as while the user is still speaking), then finalized on the whole request; only turns
whose first sentence the final verification did not confirm (partial or rejected: the
continuation's critical path) count. Every such turn runs with each continuation from the same
draft, the continuations taking turns and each turn repeated; per turn the median wall time
from the final transcript to the first sentence (TTFS) is kept, and the report gives medians
over turns, the ratio of those medians, and the median of per-turn ratios.

The worst case (no draft token ever right) runs the same turns with random stream embeddings
on the same weights: without a fallback (`patience` 0, every pass pays for a draft that fails)
and with the default fallback to plain steps after three failed passes (the bound). The best
case (every draft right) drafts the plain reply itself, the streams still computed
(`ReplyProposer`): the most the streams could save on this model and machine.
"""
from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, replace

from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig, truncate_request
from foresay.engine.predgen.continuation import ContinuationConfig, ContinuationStats
from foresay.engine.predgen.strategies import make_continuation
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn


@dataclass(frozen=True)
class TurnRun:
    ttfs: float
    nfetfs: int
    outcome: str
    reply: tuple[int, ...]
    stats: ContinuationStats


class ReplyProposer:
    """Speculative Streaming's best case: a streams pass whose drafts are the model's own reply
    (the streams still run and propose, so a pass costs what it costs; only their answer is
    replaced). Every draft is right: the ceiling of what the streams can save here."""

    def __init__(self, run, reply, cache, prompt_length: int):
        self.run, self.reply, self.cache, self.prompt_length = run, tuple(reply), cache, prompt_length

    def __call__(self, cache, ids):
        return self.run(cache, ids)

    def propose(self, stream_rows) -> list[int]:
        self.run.propose(stream_rows)  # its cost, not its answer
        return self.after_pending(len(stream_rows))

    def after_pending(self, n: int) -> list[int]:
        """The n reply tokens after the pending one (the cache holds prompt + accepted tokens)."""
        at = len(self.cache) - self.prompt_length  # the pending token's place in the reply
        return list(self.reply[at + 1:at + 1 + n])


def best_case_factory(reply, conv: Conversation, prompt_length: int):
    """A continuation factory for `PredGenTurn`: the streams continuation with `ReplyProposer`,
    its first draft the reply too (in place of the stale draft's tail)."""
    def factory(config, stale, lm):
        strategy = make_continuation(config, stale, lm)
        strategy.run = ReplyProposer(strategy.run, reply, conv.cache, prompt_length)
        strategy.draft = strategy.run.after_pending(strategy.length)
        return strategy
    return factory


def run_turn(lm, config: PredGenConfig, partial: str, full: str, best_for: tuple[int, ...] | None = None) -> TurnRun:
    """Draft on `partial`, finalize on `full`, finish the reply; TTFS on the wall clock.
    `best_for`: the streams continuation's best case, drafting this reply."""
    conv = Conversation(lm, reserve_tokens=config.max_new_tokens)
    factory = make_continuation if best_for is None else best_case_factory(best_for, conv, len(conv.prompt(full).ids))
    turn = PredGenTurn(conv, config, clock=time.perf_counter, continuation_factory=factory)
    turn.update(partial, 1)
    record = turn.finalize(full)
    stats = turn.continuation.stats
    turn.finish()
    return TurnRun(record.ttfs, record.nfetfs, record.outcome, tuple(turn.draft), stats)


def held_out_requests(n: int, seed: int = 0, split: str = "test") -> list[tuple[str, str]]:
    """(cut-off request, whole request) for the first request of `n` held-out dialogues."""
    rng = random.Random(seed)
    pairs = []
    for dialogue in DialogueGenerator(DomainConfig(seed=seed), split).dialogues(n):
        full = dialogue.turns[0].user
        cut = truncate_request(full, rng)
        if cut.strip() and cut != full:
            pairs.append((cut, full))
    return pairs


def measure(lms: dict, specs: dict[str, tuple[str, str]], requests, repeats: int = 3, max_new_tokens: int = 64,
            progress=print, patience: dict[str, int] | None = None, best: tuple[str, ...] = ()) -> dict:
    """`lms`: name -> loaded model (the same weights; the worst case's has random stream
    embeddings); `specs`: method -> (model name, continuation spec), the first being the
    reference (plain); `patience`: method -> the continuation's give-up patience, where not the
    default; `best`: streams methods run as their best case (drafting the reference's reply).
    Returns per-method medians over the turns that missed."""
    base = PredGenConfig(max_new_tokens=max_new_tokens)
    configs = {}
    for method, (model, spec) in specs.items():
        continuation = ContinuationConfig.parse(spec)
        if patience and method in patience:
            continuation = replace(continuation, patience=patience[method])
        configs[method] = (lms[model], replace(base, continuation=continuation))
    reference = next(iter(specs))
    for lm, config in configs.values():  # warm-up: allocations, first-use costs
        for cut, full in requests[:3]:
            run_turn(lm, config, cut, full)
    per_method: dict[str, list[TurnRun]] = {m: [] for m in specs}
    identical = {m: 0 for m in specs}
    missed = 0
    for n, (cut, full) in enumerate(requests):
        first = run_turn(*configs[reference], cut, full)
        if first.outcome not in ("partial", "rejected"):
            continue
        missed += 1
        runs: dict[str, list[TurnRun]] = {m: [] for m in specs}
        for _ in range(repeats):
            for method, (lm, config) in configs.items():
                runs[method].append(run_turn(lm, config, cut, full, first.reply if method in best else None))
        for method, rs in runs.items():
            middle = sorted(rs, key=lambda r: r.ttfs)[len(rs) // 2]
            per_method[method].append(middle)
            identical[method] += middle.reply == first.reply
        if (n + 1) % 25 == 0:
            progress(f"{n + 1}/{len(requests)} requests, {missed} missed turns")
    report = {"requests": len(requests), "missed_turns": missed, "repeats": repeats, "methods": {}}
    ref = per_method[reference]
    for method, rs in per_method.items():
        if not rs:
            continue
        stats = rs[0].stats.__class__(method)
        for r in rs:
            stats = replace(stats, passes=stats.passes + r.stats.passes, tokens=stats.tokens + r.stats.tokens,
                            computed=stats.computed + r.stats.computed, guessed=stats.guessed + r.stats.guessed)
        proposed = stats.computed - stats.passes  # every pass runs the pending token plus the draft
        ttfs = statistics.median(r.ttfs for r in rs)
        report["methods"][method] = {
            "continuation": specs[method][1], "model": specs[method][0],
            "ttfs_median_ms": round(1000 * ttfs, 2),
            "ttfs_ratio_vs_plain": round(statistics.median(r.ttfs for r in ref) / ttfs, 3),
            "per_turn_ratio_median": round(statistics.median(a.ttfs / b.ttfs for a, b in zip(ref, rs)), 3),
            "nfetfs_mean": round(statistics.fmean(r.nfetfs for r in rs), 2),
            "tokens_per_pass": round(stats.tokens / stats.passes, 3) if stats.passes else None,
            "draft_acceptance": round(stats.guessed / proposed, 3) if proposed else None,
            "accepted_draft_per_pass": round(stats.guessed / stats.passes, 3) if stats.passes else None,
            "gave_up_turns": sum(r.stats.gave_up_at is not None for r in rs),
            "reply_identical_to_plain": f"{identical[method]}/{len(rs)}",
        }
    return report


def pass_costs(lm, prompt_ids: list[int], repeats: int = 50) -> dict:
    """Median ms of a plain one-token step and of a streams pass over 1 + K positions (K = 0 and
    K = the model's stream count) after `prompt_ids`, alternating: the worst case's price per
    token is the full pass's over the step's."""
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    from foresay.engine.predgen.streams import StreamsPass, stream_heads

    run = StreamsPass(lm, stream_heads(lm))
    gamma = run.heads.spec.streams
    cache = DynamicKVCache(lm)
    cache.append(prompt_ids, keep_logits=1)
    n = len(cache)
    times: dict[str, list[float]] = {"plain step": [], "streams pass, no draft": [], f"streams pass, {gamma} drafted": []}
    for _ in range(repeats):
        for name, ids in zip(times, ([5], [5], [5] * (gamma + 1))):
            start = time.perf_counter()
            if name == "plain step":
                cache.append(ids, keep_logits=1)
            else:
                _, streams = run(cache, ids)
                run.propose(streams[-1])
            times[name].append(time.perf_counter() - start)
            cache.crop(n)
    medians = {k: round(1000 * statistics.median(v), 3) for k, v in times.items()}
    step = medians["plain step"]
    return {"context_tokens": n, "ms": medians,
            "ratio_to_step": {k: round(v / step, 3) for k, v in medians.items()}}
