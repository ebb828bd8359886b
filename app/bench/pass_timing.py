"""Timings of the chat model's own passes: a later turn against the first, a decode step against
a verification pass (`foresay bench predgen --turn-cost`, `foresay bench gpu`)."""
from __future__ import annotations

import statistics
import time


def measure_turn_cost(lm, turns: int, text: str, reply_tokens: int, repeats: int = 5) -> dict:
    """Cost of the same new turn (prefill it, decode `reply_tokens`) after no history and after
    `turns - 1` earlier turns, timed alternately; medians."""
    from foresay.engine.llm.decoding import greedy_reply
    from foresay.engine.predgen.conversation import Conversation

    first = Conversation(lm, reserve_tokens=reply_tokens)
    late = Conversation(lm, reserve_tokens=reply_tokens)
    for _ in range(turns - 1):
        prompt = late.prompt(text)
        ids, _ = greedy_reply(late.cache, list(prompt.ids), reply_tokens)
        late.commit_turn(prompt, ids)
    costs: dict[str, list[float]] = {"first": [], "late": [], "cold": []}
    cold = lm.kv_cache()  # one cache emptied each time (a static one is costly to make)
    for _ in range(repeats):
        for name, conv in (("first", first), ("late", late)):
            conv.prefill_history()
            conv.cache.crop(len(conv.history_ids))  # drop the previous measurement's turn
            prompt = conv.prompt(text)
            start = time.perf_counter()
            greedy_reply(conv.cache, list(prompt.ids), reply_tokens)
            costs[name].append(time.perf_counter() - start)
        cold.reset()
        start = time.perf_counter()
        greedy_reply(cold, list(late.prompt(text).ids), reply_tokens)
        costs["cold"].append(time.perf_counter() - start)
    first_ms, late_ms = (1000 * statistics.median(costs[k]) for k in ("first", "late"))
    return {"turns": turns, "context_tokens": len(late.prompt(text).ids), "turn_1_ms": first_ms,
            f"turn_{turns}_ms": late_ms, "ratio": late_ms / first_ms,
            f"turn_{turns}_cold_ms": 1000 * statistics.median(costs["cold"])}


def probe_ids(lm, n: int) -> list[int]:
    """`n` token ids spread over the model's vocabulary, the same every time: the input of the
    timed and profiled passes (their content does not change a pass's cost)."""
    vocab = min(getattr(lm, "vocab_size", None) or lm.model.config.vocab_size, len(lm.tokenizer))
    return [(7 * i + 3) % vocab for i in range(n)]


def measure_pass_timing(lm, context: int = 512, tail: int = 16, draft: int = 32, repeats: int = 10) -> dict:
    """Median ms of one decode step and of one verification pass (a changed prompt tail plus a
    draft) after `context` cached tokens."""
    ids = probe_ids(lm, context + tail + draft + 1)
    cache = lm.kv_cache()
    cache.append(ids[:context], keep_logits=1)
    step, verify = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        cache.append(ids[context:context + 1], keep_logits=1)
        step.append(time.perf_counter() - start)
        cache.crop(context)
        start = time.perf_counter()
        cache.append(ids[context:context + tail + draft])
        verify.append(time.perf_counter() - start)
        cache.crop(context)
    return {"context_tokens": context, "decode_step_ms": 1000 * statistics.median(step),
            f"verify_pass_ms_tail{tail}_draft{draft}": 1000 * statistics.median(verify)}
