"""Plain greedy decoding over an explicit KV cache: the reference PredGen must reproduce."""
from __future__ import annotations

from dataclasses import dataclass

from foresay.engine.llm.cache import KVCache


@dataclass(frozen=True)
class ReplyStats:
    prefill_tokens: int   # prompt tokens computed (the rest came from the cache)
    passes: int           # forward passes


def greedy_reply(cache: KVCache, prompt_ids: list[int], max_new_tokens: int
                  ) -> tuple[list[int], ReplyStats]:
    """Greedy reply to `prompt_ids` (ending with the end-of-message token if one was produced).

    Reuses whatever prefix of `prompt_ids` `cache` already holds.
    """
    eos = cache.lm.eos_ids
    start, logits = cache.sync(list(prompt_ids))
    passes = 1
    out = [int(logits[-1].argmax())]
    while out[-1] not in eos and len(out) < max_new_tokens:
        logits = cache.append([out[-1]], keep_logits=1)
        passes += 1
        out.append(int(logits[-1].argmax()))
    return out, ReplyStats(len(prompt_ids) - start, passes)
