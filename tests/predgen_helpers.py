"""Shared helpers for the PredGen tests: prompts, a word-by-word driver, a continuation driver."""
import random

from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenTurn

_SUBJECTS = ["the weather in Paris", "a timer for ten minutes", "my email to the team", "the capital of Japan",
             "a good book about travel", "the song that was playing", "coffee or tea in the morning",
             "the meeting on Friday", "a café in Berlin", "the price of 3.5 kilos of apples"]
_ASKS = ["Can you tell me about", "Please explain", "What do you think of", "I would like to know about",
         "Could you remind me of", "Write a short note on", "Um, so, what about", "Help me plan"]
_TAILS = ["today", "tomorrow morning", "before the trip", "in simple words", "for my family", "again",
          "if you can", "right now please"]


def make_prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    prompts = []
    while len(prompts) < n:
        p = f"{rng.choice(_ASKS)} {rng.choice(_SUBJECTS)} {rng.choice(_TAILS)}"
        if rng.random() < 0.5:
            p += rng.choice(["?", ".", ""])
        if p not in prompts:
            prompts.append(p)
    return prompts


def drive_word_by_word(turn, prompt: str):
    """Partials for every word prefix but the last, then the final prompt."""
    words = prompt.split()
    for i in range(1, len(words)):
        turn.update(" ".join(words[:i]), i)
    return turn.finalize(prompt)


def cold_greedy(lm, prompt_ids, max_new_tokens):
    ids, _ = greedy_reply(DynamicKVCache(lm), list(prompt_ids), max_new_tokens)
    return [t for t in ids if t not in lm.eos_ids]


def advance_until(strategy, cache, pending: int, n: int):
    """Advance `strategy` until the reply holds `n` tokens, the pending one included (its budget,
    respected exactly); yields (tokens, pending, step) after every advance, for checks between."""
    tokens: list[int] = []
    while len(tokens) + 1 < n:
        step = strategy.advance(cache, tokens, pending, n - len(tokens) - 1)
        tokens, pending = tokens + list(step.accepted), step.pending
        yield tokens, pending, step


def turns_with_history(lm, config, dialogues, drive=drive_word_by_word):
    """Every user turn of `dialogues` through a PredGenTurn driven by `drive`, earlier turns kept
    as history; yields (turn, text, reference) before committing the turn, `reference` being the
    model's own greedy reply to the turn's prompt (end-of-message token included)."""
    for dialogue in dialogues:
        conv = Conversation(lm)
        for text in (t.user for t in dialogue.turns):
            turn = PredGenTurn(conv, config)
            drive(turn, text)
            turn.finish()
            reference, _ = greedy_reply(DynamicKVCache(lm), list(turn.prompt.ids), config.max_new_tokens)
            yield turn, text, reference
            turn.commit()
