"""The CLLM trainer's data: Jacobi trajectories of a chat model, collected exactly as PredGen's
continuation runs them, and each pass's state as a training sequence labelled with the fixed point
(the greedy reply). `train_cllm` collects them once from the base model, or again from the model
being trained (on-policy) every `refresh_every` steps."""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

from foresay.engine.demo.chat_data import IGNORE, ChatEncoder, Example
from foresay.engine.demo.dialogues import truncate_request
from foresay.engine.sequences import common_prefix_length

if TYPE_CHECKING:
    from foresay.engine.demo.train_cllm import CllmTrainConfig


def _greedy(lm, prompt: list[int], n: int) -> list[int]:
    from foresay.engine.llm.decoding import greedy_reply
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    ids, _ = greedy_reply(DynamicKVCache(lm), prompt, n)
    return ids


def trajectory_states(lm, prompt: list[int], draft: list[int], target: list[int], window: int,
                      fill: bool = False) -> list[tuple[int, list[int]]]:
    """The Jacobi states PredGen's continuation passes through from `draft` to `target` (y*,
    greedy): (accepted tokens before the window, window tokens: pending + guesses)."""
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    from foresay.engine.predgen.continuation import FixedWindow, GiveUpWhenSlow, JacobiFromDraft

    kept = common_prefix_length(draft, target)
    if kept >= len(target) - 1:
        return []
    cache = DynamicKVCache(lm)
    cache.append(prompt + target[:kept], keep_logits=1)
    policy = FixedWindow(window, fill=fill)
    strategy = JacobiFromDraft(draft[kept + 1:], policy, GiveUpWhenSlow(patience=0))
    tokens, pending, states = list(target[:kept]), target[kept], []
    while len(tokens) + 1 < len(target):
        budget = len(target) - len(tokens) - 1
        states.append((len(tokens), [pending] + policy.guesses(strategy.guess, pending, budget)))
        step = strategy.advance(cache, tokens, pending, budget)
        tokens += step.accepted
        pending = step.pending
    if tokens + [pending] != target:
        raise RuntimeError("a Jacobi trajectory did not reach the greedy reply")
    return states


def state_example(prompt: list[int], target: list[int], accepted: int, window: list[int],
                  pad_id: int) -> Example:
    """prompt + y*[:accepted] + window (+ one padding input so the last window row has a label);
    labels: y* aligned position by position (the fixed point), IGNORE past its end."""
    ids = prompt + target[:accepted] + window + [pad_id]
    reply = [target[j] if j < len(target) else IGNORE for j in range(accepted + len(window) + 1)]
    return Example(ids, [IGNORE] * len(prompt) + reply)


def split_labels(example: Example, span: int = 0) -> tuple[Example, Example]:
    """A state's labels as (AR, consistency): a label is a consistency label once a wrong token
    (a wrong guess, or the padding input past the window) came before it in the input; with
    `span`, only the first `span` of those keep their label."""
    wrong = next((k for k, (i, l) in enumerate(zip(example.ids, example.labels)) if l != IGNORE and i != l),
                 len(example.ids))
    end = wrong + span if span else len(example.ids)
    ar = [l if k <= wrong else IGNORE for k, l in enumerate(example.labels)]
    consistency = [l if wrong < k <= end else IGNORE for k, l in enumerate(example.labels)]
    return Example(example.ids, ar), Example(example.ids, consistency)


def collect(lm, encoder: ChatEncoder, config: CllmTrainConfig, dialogues, rng: random.Random,
            progress=print) -> tuple[list[Example], dict]:
    """Training states from each dialogue's last request, and what the trajectories cost:
    `jacobi_passes` to fix the `tokens_to_fix` tokens after the verification (as many passes as
    plain steps would need)."""
    examples, passes, tokens = [], 0, 0
    pad = encoder.tok.pad_token_id
    render = encoder.tok.apply_chat_template
    for n, dialogue in enumerate(dialogues):
        messages = encoder.messages(dialogue)[:-1]
        user = dialogue.turns[-1].user
        prompt = encoder._encode(render(messages, tokenize=False, add_generation_prompt=True))
        target = _greedy(lm, prompt, config.max_reply)
        drafts: list[list[int]] = []
        for _ in range(config.cuts):
            partial = dict(messages[-1], content=truncate_request(user, rng))
            partial_prompt = encoder._encode(render(messages[:-1] + [partial], tokenize=False,
                                                    add_generation_prompt=True))
            draft = _greedy(lm, partial_prompt, config.draft_tokens)
            if draft in drafts:
                continue
            drafts.append(draft)
            states = trajectory_states(lm, prompt, draft, target, config.window, config.fill)
            passes += len(states)
            tokens += len(target) - 1 - states[0][0] if states else 0
            # a window of the pending token alone is a plain step: the AR data already cover it
            examples += [state_example(prompt, target, a, w, pad) for a, w in states if len(w) > 1]
        if (n + 1) % 200 == 0:
            progress(f"trajectories: {n + 1}/{len(dialogues)} requests, {len(examples)} states")
    return examples, {"requests": len(dialogues), "states": len(examples), "jacobi_passes": passes,
                      "tokens_to_fix": tokens, "passes_per_token": passes / tokens if tokens else None}
