"""Training sequences for the demo chat model, in the exact token layout the LLM layer builds.

A dialogue becomes one sequence: system prompt, then user / assistant turns in the chat template;
the loss covers the assistant replies and their end-of-message token. With `truncate_prob` the
dialogue's last user turn is cut off as a streaming transcript would be (the reply stays the
full request's), as PredGen's fine-tuning does, so the model guesses from partial requests.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from foresay.engine.demo.dialogues import Dialogue, truncate_request
from foresay.engine.demo.facts import COUNTRIES
from foresay.engine.demo.intents import FOLLOW_UPS, INTENTS

IGNORE = -100


@dataclass(frozen=True)
class Example:
    ids: list[int]
    labels: list[int]   # IGNORE where no loss is taken


def corpus_lines(system_prompt: str) -> list[str]:
    """Every word the domain can produce, for training the tokenizer."""
    from foresay.engine.demo.dialogues import PREFIXES, SUFFIXES
    lines = [system_prompt, " ".join(PREFIXES), " ".join(SUFFIXES), " ".join(COUNTRIES)]
    for intent in INTENTS:
        lines += list(intent.templates)
        lines += [intent.reply(v) for v in intent.values()]
    for follow in FOLLOW_UPS:
        lines += list(follow.templates)
    return lines


class ChatEncoder:
    """Renders dialogues with the tokenizer's chat template, piece by piece, with loss labels."""

    def __init__(self, tokenizer, system_prompt: str):
        self.tok = tokenizer
        self.system_prompt = system_prompt
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def messages(self, dialogue: Dialogue, last_user: str | None = None) -> list[dict]:
        messages = [{"role": "system", "content": self.system_prompt}]
        for i, turn in enumerate(dialogue.turns):
            user = last_user if last_user is not None and i == len(dialogue.turns) - 1 else turn.user
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": turn.reply}]
        return messages

    def encode(self, dialogue: Dialogue, last_user: str | None = None) -> Example:
        messages = self.messages(dialogue, last_user)
        ids: list[int] = []
        labels: list[int] = []
        rendered = ""
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = self.tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
            head = self._encode(prompt[len(rendered):])
            reply = self._encode(message["content"]) + [self.end]
            ids += head + reply
            labels += [IGNORE] * len(head) + reply
            rendered = prompt + message["content"] + "<|im_end|>"
        full = self.tok.apply_chat_template(messages, tokenize=False)
        tail = self._encode(full[len(rendered):])
        return Example(ids + tail, labels + [IGNORE] * len(tail))

    def training_examples(self, dialogues: list[Dialogue], truncate_prob: float,
                          rng: random.Random) -> list[Example]:
        examples = []
        for dialogue in dialogues:
            last = None
            if rng.random() < truncate_prob:
                last = truncate_request(dialogue.turns[-1].user, rng)
            examples.append(self.encode(dialogue, last))
        return examples
