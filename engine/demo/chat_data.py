"""Training sequences for the demo chat model, in the exact token layout the LLM layer builds.

A dialogue becomes one sequence: system prompt, then user / assistant turns in the chat template;
the loss covers the assistant replies and their end-of-message token. With `truncate_prob` the
dialogue's last user turn is cut off as a streaming transcript would be (the reply stays the
full request's), as PredGen's fine-tuning does, so the model guesses from partial requests.

With `end_of_message`, the loss also covers where each user message ends, at the position that
predicts the token after the user's text (the position whose probability of `<|im_end|>` is
P(end of user turn) at run time): a whole request is labelled `<|im_end|>`; a request cut
mid-sentence is labelled with the next token of the words that were cut off, so the model learns
that the message goes on. A cut that is itself a whole request (`completeness`) counts as whole.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from foresay.engine.demo.completeness import is_complete_request
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

    def encode(self, dialogue: Dialogue, last_user: str | None = None, end_of_message: bool = False) -> Example:
        """The dialogue's sequence; `last_user` replaces the last request's text (a cut or an
        unpunctuated one); `end_of_message` also labels where each user message ends."""
        messages = self.messages(dialogue, last_user)
        ids: list[int] = []
        labels: list[int] = []
        rendered = ""
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = self.tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
            piece = prompt[len(rendered):]
            user = messages[i - 1]["content"]
            at = piece.rfind(user)
            head = self._encode(piece[:at + len(user)])
            after = self._encode(piece[at + len(user):])
            head_labels = [IGNORE] * (len(head) + len(after))
            if end_of_message and after:
                full = dialogue.turns[sum(m["role"] == "assistant" for m in messages[:i])].user
                head_labels[len(head)] = self._end_label(piece[:at], user, full, head)
            reply = self._encode(message["content"]) + [self.end]
            ids += head + after + reply
            labels += head_labels + reply
            rendered = prompt + message["content"] + "<|im_end|>"
        full = self.tok.apply_chat_template(messages, tokenize=False)
        tail = self._encode(full[len(rendered):])
        return Example(ids + tail, labels + [IGNORE] * len(tail))

    def _end_label(self, context: str, said: str, full: str, said_ids: list[int]) -> int:
        """`<|im_end|>` where the message may end; else the next token of the words cut off."""
        if said == full or is_complete_request(said):
            return self.end
        whole = self._encode(context + full)
        if len(whole) <= len(said_ids) or whole[:len(said_ids)] != said_ids:
            return IGNORE  # the cut does not fall on a token boundary: no label
        return whole[len(said_ids)]

    def training_examples(self, dialogues: list[Dialogue], truncate_prob: float, rng: random.Random,
                          end_of_message: bool = False, unpunctuated_prob: float = 0.0,
                          punct_rng: random.Random | None = None) -> list[Example]:
        """`unpunctuated_prob`: share of whole last requests whose final punctuation is dropped (an
        ASR may not write it), drawn from `punct_rng` so that `rng`'s cuts stay the same."""
        examples = []
        punct_rng = punct_rng or random.Random(0)
        for dialogue in dialogues:
            last = None
            if rng.random() < truncate_prob:
                last = truncate_request(dialogue.turns[-1].user, rng)
            elif unpunctuated_prob and punct_rng.random() < unpunctuated_prob:
                last = dialogue.turns[-1].user.rstrip(".?!")
            examples.append(self.encode(dialogue, last, end_of_message))
        return examples
