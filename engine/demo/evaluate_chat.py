"""Exact-match evaluation of a chat model on demo dialogues, through Foresay's own LLM layer.

Each turn is answered by greedy decoding of the full request, after the dialogue's earlier turns
with their reference replies as history (so one wrong answer does not spoil the next turn's score).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.demo.dialogues import Dialogue
from foresay.engine.llm.model import ChatLM
from foresay.engine.predgen.conversation import Conversation


@dataclass(frozen=True)
class Miss:
    user: str
    expected: str
    got: str


@dataclass
class ChatScore:
    turns: int = 0
    exact: int = 0
    by_held_out: dict[str, list[int]] = field(default_factory=dict)  # kind -> [exact, turns]
    misses: list[Miss] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.exact / self.turns if self.turns else 0.0


def answer(conv: Conversation, user: str, max_new_tokens: int = 64) -> str:
    """The model's greedy reply to `user` after the conversation's history (history unchanged)."""
    conv.prefill_history()
    prompt = conv.prompt(user)
    ids, _ = greedy_reply(conv.cache, list(prompt.ids), max_new_tokens)
    return conv.lm.decode(ids).strip()


def evaluate_chat(lm: ChatLM, dialogues: list[Dialogue], max_new_tokens: int = 64) -> ChatScore:
    conv = Conversation(lm, reserve_tokens=max_new_tokens)
    score = ChatScore()
    for dialogue in dialogues:
        conv.reset()
        for turn in dialogue.turns:
            got = answer(conv, turn.user, max_new_tokens)
            right = got == turn.reply
            score.turns += 1
            score.exact += right
            tally = score.by_held_out.setdefault(turn.held_out or "none", [0, 0])
            tally[0] += right
            tally[1] += 1
            if not right:
                score.misses.append(Miss(turn.user, turn.reply, got))
            prompt = conv.prompt(turn.user)
            conv.commit_turn(prompt, lm.encode(turn.reply))
    return score
