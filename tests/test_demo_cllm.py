"""The CLLM fine-tune of the demo chat model: its training data are the model's own Jacobi
trajectories, labelled with the fixed point; the shipped result loads by name and, like every
model, decodes losslessly with Jacobi."""
import random

import pytest

from foresay.engine.decoding import greedy_reply
from foresay.engine.demo.chat_data import IGNORE, ChatEncoder
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig, truncate_request
from foresay.engine.demo.models import DEMO_CHAT, demo_model_dir
from foresay.engine.demo.train_cllm import state_example, trajectory_states
from foresay.engine.kv import KVCache
from foresay.engine.llm import LLMConfig, load_llm
from foresay.engine.predgen.continuation import ContinuationConfig
from foresay.engine.predgen.conversation import Conversation, default_system_prompt
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn

from predgen_helpers import drive_word_by_word


@pytest.fixture(scope="module")
def demo_lm():
    return load_llm(LLMConfig(model="demo", threads=2))


def test_trajectories_end_at_the_greedy_reply_and_label_it(demo_lm):
    encoder = ChatEncoder(demo_lm.tokenizer, default_system_prompt())
    rng = random.Random(0)
    found = 0
    for dialogue in DialogueGenerator(DomainConfig(seed=5), "train").dialogues(12):
        messages = encoder.messages(dialogue)[:-1]
        render = demo_lm.tokenizer.apply_chat_template
        prompt = demo_lm.encode(render(messages, tokenize=False, add_generation_prompt=True))
        cut = dict(messages[-1], content=truncate_request(dialogue.turns[-1].user, rng))
        partial = demo_lm.encode(render(messages[:-1] + [cut], tokenize=False, add_generation_prompt=True))
        target, _ = greedy_reply(KVCache(demo_lm), prompt, 48)
        draft, _ = greedy_reply(KVCache(demo_lm), partial, 24)
        states = trajectory_states(demo_lm, prompt, draft, target, window=8)  # raises unless it converges
        for accepted, window in states:
            assert window[0] == target[accepted] and len(window) <= 8
            example = state_example(prompt, target, accepted, window, pad_id=0)
            assert example.ids[:len(prompt) + accepted] == prompt + target[:accepted]
            assert example.ids[len(prompt) + accepted:-1] == window
            labelled = example.labels[len(prompt):]
            assert labelled == [target[j] if j < len(target) else IGNORE for j in range(len(labelled))]
            assert example.labels[:len(prompt)] == [IGNORE] * len(prompt)
        found += bool(states)
    assert found > 0  # some cut-off requests draft a different reply


def test_the_shipped_cllm_loads_by_name_and_decodes_losslessly():
    folder = demo_model_dir("demo-cllm", DEMO_CHAT)
    card = (folder / "README.md").read_text()
    assert "sha256" in card and "demo-chat" in card
    lm = load_llm(LLMConfig(model="demo-cllm", threads=2))
    config = PredGenConfig(max_new_tokens=48, continuation=ContinuationConfig.parse("jacobi:16:fill"))
    for dialogue in DialogueGenerator(DomainConfig(seed=4), "test").dialogues(3):
        turn = PredGenTurn(Conversation(lm), config)
        drive_word_by_word(turn, dialogue.turns[0].user)
        turn.finish()
        reference, _ = greedy_reply(KVCache(lm), list(turn.prompt.ids), 48)
        assert turn.draft == reference
