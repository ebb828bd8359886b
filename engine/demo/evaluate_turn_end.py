"""How well a chat model's P(end of turn) tells a whole request from one cut mid-sentence.

P(end of turn) is taken exactly where the pipeline takes it: from PredGen's verification pass
(`PredGenTurn.update`, which reads the probability of the template's end-of-message token after
the user's text), after the dialogue's earlier turns with their reference replies as history.
Each held-out request is scored three ways: as written, without its final punctuation (an ASR
may not write it), and cut off by 1 to 3 words where the cut is not a whole request itself.
The separation is the AUC (the chance that a whole request scores above a cut one; ties count
half).
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from foresay.engine.demo.completeness import is_complete_request
from foresay.engine.demo.dialogues import Dialogue, truncate_request
from foresay.engine.llm.model import ChatLM
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenTurn


@dataclass
class TurnEndScores:
    complete: list[float] = field(default_factory=list)       # requests as written
    unpunctuated: list[float] = field(default_factory=list)   # the same, final punctuation dropped
    cut: list[float] = field(default_factory=list)            # cut mid-sentence

    def summary(self) -> dict:
        def med(values):
            return round(statistics.median(values), 4) if values else None
        return {"requests": len(self.complete), "cut_requests": len(self.cut),
                "auc": round(auc(self.complete, self.cut), 4),
                "auc_unpunctuated": round(auc(self.unpunctuated, self.cut), 4),
                "median_p_complete": med(self.complete), "median_p_unpunctuated": med(self.unpunctuated),
                "median_p_cut": med(self.cut)}


def auc(positives: list[float], negatives: list[float]) -> float:
    """P(a positive scores above a negative), ties counted half (Mann-Whitney U / n1 n2)."""
    if not positives or not negatives:
        raise ValueError("AUC needs at least one score on each side")
    ranked = sorted([(p, 1) for p in positives] + [(n, 0) for n in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + j + 1) / 2  # ranks are 1-based
        rank_sum += mean_rank * sum(label for _, label in ranked[i:j])
        i = j
    n1, n2 = len(positives), len(negatives)
    return (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n2)


def p_end_of_turn(conv: Conversation, user_text: str) -> float | None:
    """P(end of turn) after `user_text`, from one PredGen verification pass (no drafting)."""
    turn = PredGenTurn(conv)
    return turn.update(user_text, 0, should_stop=lambda: True).p_end_of_turn


def evaluate_turn_end(lm: ChatLM, dialogues: list[Dialogue], seed: int = 0) -> TurnEndScores:
    conv = Conversation(lm)
    rng = random.Random(f"turn-end:{seed}")
    scores = TurnEndScores()
    for dialogue in dialogues:
        conv.reset()
        for turn in dialogue.turns:
            whole = p_end_of_turn(conv, turn.user)
            if whole is None:
                raise ValueError("the chat template hides the end of the user's message: no P(end of turn)")
            scores.complete.append(whole)
            scores.unpunctuated.append(p_end_of_turn(conv, turn.user.rstrip(".?!")))
            cut = truncate_request(turn.user, rng)
            if cut != turn.user and not is_complete_request(cut):
                scores.cut.append(p_end_of_turn(conv, cut))
            conv.commit_turn(conv.prompt(turn.user), lm.encode(turn.reply))
    return scores
