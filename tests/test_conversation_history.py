"""The model's context keeps only the history the model handles; answers stay right however long
the conversation grows."""
import json

import pytest

from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.evaluate_chat import answer
from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.sources import declared_history_turns
from foresay.engine.predgen.conversation import Conversation


@pytest.fixture(scope="module")
def demo_lm():
    return load_llm(LLMConfig(model="demo", threads=2))


def _talk(conv, turns):
    for turn in turns:
        conv.commit_turn(conv.prompt(turn.user), conv.lm.encode(turn.reply))


def test_the_demo_model_declares_the_history_it_was_trained_on(demo_lm):
    # trained on dialogues of at most 3 user turns: at most 2 earlier turns
    assert demo_lm.max_history_turns == 2
    assert load_llm(LLMConfig(model="demo", max_history_turns=5)).max_history_turns == 5
    with pytest.raises(ForesayError, match="max_history_turns"):
        LLMConfig(model="demo", max_history_turns=-1)


def test_after_20_turns_the_demo_model_answers_as_it_does_alone(demo_lm):
    history = [t for d in DialogueGenerator(DomainConfig(seed=5), "train").dialogues(12) for t in d.turns][:20]
    assert len(history) == 20
    requests = [d.turns[0] for d in DialogueGenerator(DomainConfig(seed=0), "test").dialogues(12)]
    alone = [answer(Conversation(demo_lm), r.user, 32) for r in requests]
    long = Conversation(demo_lm)
    _talk(long, history)
    assert sum(m["role"] == "user" for m in long.messages) == 2   # the oldest 18 left the context
    assert long.dropped_turns == 18
    after = [answer(long, r.user, 32) for r in requests]
    right_alone = sum(a == r.reply for a, r in zip(alone, requests))
    right_after = sum(a == r.reply for a, r in zip(after, requests))
    assert right_alone >= 7 and right_after >= right_alone - 1, list(zip(alone, after))
    unlimited = Conversation(demo_lm, max_history_turns=10_000)   # the whole history, as before
    _talk(unlimited, history)
    assert sum(answer(unlimited, r.user, 24) == r.reply for r in requests[:6]) <= 2


def test_a_follow_up_still_sees_the_previous_turn(demo_lm):
    conv = Conversation(demo_lm)
    _talk(conv, [t for d in DialogueGenerator(DomainConfig(seed=5), "train").dialogues(8) for t in d.turns])
    conv.commit_turn(conv.prompt("What is the capital of France?"), demo_lm.encode("The capital of France is Paris."))
    assert answer(conv, "And of Spain?") == "The capital of Spain is Madrid."


def test_a_resumed_history_enters_the_context_within_the_limit(demo_lm):
    conv = Conversation(demo_lm)
    conv.load([(f"request {i}", f"reply {i}.") for i in range(30)])
    assert [m["content"] for m in conv.messages] == ["request 28", "reply 28.", "request 29", "reply 29."]
    none = Conversation(demo_lm, max_history_turns=0)
    none.load([("a", "b")])
    assert none.messages == []


def test_a_model_folder_declaration_is_read_and_checked(tmp_path):
    assert declared_history_turns(tmp_path) is None   # a hub model: only its context limits it
    (tmp_path / "foresay.json").write_text(json.dumps({"max_history_turns": 4}))
    assert declared_history_turns(tmp_path) == 4
    (tmp_path / "foresay.json").write_text('{"max_history_turns": "many"}')
    with pytest.raises(ModelUnavailable, match="whole number"):
        declared_history_turns(tmp_path)
    (tmp_path / "foresay.json").write_text("{not json")
    with pytest.raises(ModelUnavailable, match="damaged"):
        declared_history_turns(tmp_path)
