"""The CLLM fine-tune of the demo chat model: its training data are the model's own Jacobi
trajectories, labelled with the fixed point; the shipped result loads by name and, like every
model, decodes losslessly with Jacobi."""
import json
import random

import pytest
import torch

from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.demo.chat_data import IGNORE, ChatEncoder
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig, truncate_request
from foresay.engine.demo.models import DEMO_CHAT, demo_model_dir
from foresay.engine.demo.train_chat import _batch, _step_loss
from foresay.engine.demo import train_cllm as trainer
from foresay.engine.demo.cllm_data import split_labels, state_example, trajectory_states
from foresay.engine.demo.train_cllm import CllmTrainConfig, _cllm_loss, sha256
from foresay.engine.errors import ForesayError
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
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
        target, _ = greedy_reply(DynamicKVCache(demo_lm), prompt, 48)
        draft, _ = greedy_reply(DynamicKVCache(demo_lm), partial, 24)
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


def test_labels_split_at_the_first_wrong_input_and_the_loss_weighs_both_terms(demo_lm):
    prompt, target = [5, 6, 7], [10, 11, 12, 13, 14]
    # accepted 1, window: pending 11 (right), 12 (right), 99 (wrong), 14 (right guess, wrong context)
    example = state_example(prompt, target, 1, [11, 12, 99, 14], pad_id=0)
    ar, consistency = split_labels(example)
    wrong = example.ids.index(99)
    assert ar.labels == example.labels[:wrong + 1] + [IGNORE] * (len(example.ids) - wrong - 1)
    assert consistency.labels == [IGNORE] * (wrong + 1) + example.labels[wrong + 1:]
    assert ar.ids == consistency.ids == example.ids
    near = split_labels(example, span=1)[1]  # only the label right after the wrong input
    after = len(example.ids) - wrong - 2
    assert near.labels == [IGNORE] * (wrong + 1) + [example.labels[wrong + 1]] + [IGNORE] * after
    # all right: only the padding input past the window is wrong, and nothing follows it
    clean = state_example(prompt, target, 1, [11, 12, 13], pad_id=0)
    assert split_labels(clean)[0].labels == clean.labels
    assert set(split_labels(clean)[1].labels) == {IGNORE}

    encoder = ChatEncoder(demo_lm.tokenizer, default_system_prompt())
    dialogue = DialogueGenerator(DomainConfig(seed=3), "train").dialogues(1)
    chat = encoder.training_examples(dialogue, 0.0, random.Random(0))
    head = encoder._encode(demo_lm.tokenizer.apply_chat_template(
        [{"role": "system", "content": default_system_prompt()}], tokenize=False))
    reply = encoder._encode("Paris is the capital of France.")
    state = state_example(head + reply[:2], reply, 1, [reply[1], 17, reply[3]], pad_id=0)
    start, model = len(head), demo_lm.model
    prefix = torch.tensor([head])
    with torch.no_grad():
        ar_only = _step_loss(model, prefix, *_batch([split_labels(state)[0]] + chat, start, 0))
        both = _cllm_loss(model, prefix, [state], chat, start, 0, weight=2.0)
        assert float(_cllm_loss(model, prefix, [state], chat, start, 0, weight=0.0)) == pytest.approx(float(ar_only))
        consistency = _step_loss(model, prefix, *_batch([split_labels(state)[1]], start, 0))
    assert float(both) == pytest.approx(float(ar_only) + 2.0 * float(consistency), rel=1e-4)

    # distilled AR term: a model distilled from itself is already where the term wants it
    model.zero_grad(set_to_none=True)
    _cllm_loss(model, prefix, [state], chat, start, 0, weight=0.0, teacher=model).backward()
    assert max(float(p.grad.abs().max()) for p in model.parameters() if p.grad is not None) < 1e-5
    model.zero_grad(set_to_none=True)
    _cllm_loss(model, prefix, [state], chat, start, 0, weight=1.0, teacher=model).backward()
    assert max(float(p.grad.abs().max()) for p in model.parameters() if p.grad is not None) > 1e-3
    model.zero_grad(set_to_none=True)


def test_cllm_config_refuses_bad_values():
    for bad in ({"cuts": 0}, {"consistency_weight": -1.0}, {"consistency_span": -1}, {"window": 1},
                {"refresh_every": -1}):
        with pytest.raises(ForesayError):
            CllmTrainConfig(**bad)


def test_on_policy_training_collects_again_from_the_model_being_trained(tmp_path, monkeypatch):
    base = demo_model_dir("demo", DEMO_CHAT)
    reference = load_llm(LLMConfig(model=str(base), threads=1)).model.state_dict()
    seen = []  # per collection: the model's mode and how far its weights are from the base's

    def spying(lm, *args, **kwargs):
        moved = max(float((p - reference[k]).abs().max()) for k, p in lm.model.state_dict().items())
        seen.append((lm.model.training, moved))
        return collect(lm, *args, **kwargs)

    collect = trainer.collect
    monkeypatch.setattr(trainer, "collect", spying)
    config = CllmTrainConfig(dialogues=6, cuts=1, steps=5, batch_size=2, warmup=1, refresh_every=2, threads=1)
    stats = trainer.train_cllm(config, base, tmp_path / "cllm", default_system_prompt(), DomainConfig(seed=7),
                               progress=lambda line: None)
    assert [r["step"] for r in stats["refreshes"]] == [2, 4]
    assert all(r["requests"] == 6 and r["states"] > 0 for r in stats["refreshes"])
    assert [training for training, _ in seen] == [False, False, False]  # collected in eval mode
    assert seen[0][1] == 0 and 0 < seen[1][1] < seen[2][1]  # from the base, then from the model as trained
    assert json.loads((tmp_path / "cllm" / "training.json").read_text())["refreshes"] == stats["refreshes"]

    off = trainer.train_cllm(CllmTrainConfig(dialogues=6, cuts=1, steps=3, batch_size=2, warmup=1, refresh_every=0,
                                             threads=1),
                             base, tmp_path / "off", default_system_prompt(), DomainConfig(seed=7),
                             progress=lambda line: None)
    assert off["refreshes"] == [] and len(seen) == 4  # off-policy: collected once, from the base


def test_the_shipped_cllm_derives_from_the_shipped_base():
    base = demo_model_dir("demo", DEMO_CHAT) / "model.safetensors"
    folder = demo_model_dir("demo-cllm", DEMO_CHAT)
    assert sha256(base) in (folder / "README.md").read_text()
    assert json.loads((folder / "training.json").read_text())["base_sha256"] == sha256(base)


@pytest.mark.parametrize("spec", ["jacobi", "jacobi:16:fill"])
def test_the_shipped_cllm_loads_by_name_and_decodes_losslessly(spec):
    folder = demo_model_dir("demo-cllm", DEMO_CHAT)
    card = (folder / "README.md").read_text()
    assert "sha256" in card and "demo-chat" in card
    lm = load_llm(LLMConfig(model="demo-cllm", threads=2))
    config = PredGenConfig(max_new_tokens=48, continuation=ContinuationConfig.parse(spec))
    for dialogue in DialogueGenerator(DomainConfig(seed=4), "test").dialogues(3):
        turn = PredGenTurn(Conversation(lm), config)
        drive_word_by_word(turn, dialogue.turns[0].user)
        turn.finish()
        reference, _ = greedy_reply(DynamicKVCache(lm), list(turn.prompt.ids), 48)
        assert turn.draft == reference
