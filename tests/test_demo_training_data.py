"""The demo models' training data matches what the runtime feeds them (no training here)."""
import random

import pytest

from foresay.engine.demo.chat_data import IGNORE, ChatEncoder
from foresay.engine.demo.completeness import is_complete_request
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.evaluate_whisper import edit_distance, words
from foresay.engine.demo.train_chat import ChatTrainConfig, build_demo_tokenizer
from foresay.engine.errors import ForesayError
from foresay.engine.llm.fixtures import save_chat_tokenizer
from foresay.engine.predgen.conversation import default_system_prompt


@pytest.fixture(scope="module")
def chat_tokenizer(tmp_path_factory):
    tok = build_demo_tokenizer(default_system_prompt(), seed=0)
    return save_chat_tokenizer(tok, tmp_path_factory.mktemp("demo-tok"))


def test_training_sequences_are_the_rendered_chat_template(chat_tokenizer):
    encoder = ChatEncoder(chat_tokenizer, default_system_prompt())
    for dialogue in DialogueGenerator(DomainConfig(seed=5), "train").dialogues(30):
        example = encoder.encode(dialogue)
        full = chat_tokenizer.apply_chat_template(encoder.messages(dialogue), tokenize=False)
        assert example.ids == chat_tokenizer.encode(full, add_special_tokens=False)
        # the loss covers exactly the replies, each closed by <|im_end|>
        taken = [i for i, label in zip(example.ids, example.labels) if label != IGNORE]
        replies = [chat_tokenizer.encode(t.reply, add_special_tokens=False) + [encoder.end]
                   for t in dialogue.turns]
        assert taken == [i for reply in replies for i in reply]


def test_the_system_prompt_is_few_tokens_and_ids_match_the_llm_layer_prompt(chat_tokenizer):
    system = chat_tokenizer.apply_chat_template(
        [{"role": "system", "content": default_system_prompt()}], tokenize=False)
    assert len(chat_tokenizer.encode(system, add_special_tokens=False)) < 100


def test_truncated_last_turns_keep_the_full_reply(chat_tokenizer):
    encoder = ChatEncoder(chat_tokenizer, default_system_prompt())
    dialogues = DialogueGenerator(DomainConfig(seed=1, max_turns=1), "train").dialogues(40)
    cut = encoder.training_examples(dialogues, truncate_prob=1.0, rng=random.Random(0))
    whole = encoder.training_examples(dialogues, truncate_prob=0.0, rng=random.Random(0))
    shorter = sum(len(c.ids) < len(w.ids) for c, w in zip(cut, whole))
    assert shorter >= 35  # one-word requests cannot be cut
    for c, w in zip(cut, whole):
        assert [i for i, l in zip(c.ids, c.labels) if l != IGNORE] == \
               [i for i, l in zip(w.ids, w.labels) if l != IGNORE]


def test_training_config_is_validated():
    with pytest.raises(ForesayError, match="truncate_prob"):
        ChatTrainConfig(truncate_prob=2)
    with pytest.raises(ForesayError, match="steps"):
        ChatTrainConfig(steps=0)
    with pytest.raises(ForesayError, match="stop_at"):
        ChatTrainConfig(steps=10, stop_at=11)


def test_word_error_counting():
    assert words("Hey Foresay, what's 7 plus 5?") == ["hey", "foresay", "what's", "7", "plus", "5"]
    assert edit_distance(["a", "b", "c"], ["a", "c"]) == 1
    assert edit_distance(["a", "b"], ["x", "a", "b", "y"]) == 2
    assert edit_distance([], ["a"]) == 1


def test_trainers_run_and_save_loadable_models(tmp_path):
    """Two steps each (a smoke run of the code path, not training): the saved folders load."""
    import json

    import numpy as np

    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper
    from foresay.engine.demo.speech import SpeechSet
    from foresay.engine.demo.train_chat import train_chat
    from foresay.engine.demo.train_whisper import (WhisperTrainConfig, build_whisper_tokenizer, train_whisper,
                                                   training_data)
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm

    quiet = lambda line: None  # noqa: E731
    stats = train_chat(ChatTrainConfig(steps=2, batch_size=2, warmup=1, checkpoint_every=1), tmp_path / "chat",
                       default_system_prompt(), DomainConfig(), progress=quiet)
    assert stats["steps_done"] == 2 and load_llm(LLMConfig(model=str(tmp_path / "chat"))).eos_ids

    texts = ["What is 2 plus 2?", "Hello."]
    tok = build_whisper_tokenizer(texts * 20)
    rng = np.random.default_rng(0)
    speech = SpeechSet(texts, [rng.standard_normal(16_000).astype(np.float32) * 0.1 for _ in texts], [])
    data = training_data(tok, speech)
    assert data.frames == [51, 51] and data.features.shape == (2, 80, 300)
    from foresay.engine.demo.speech import VoiceSetting
    voiced = SpeechSet(texts, speech.audio, [VoiceSetting("en-us", 160, 50, 0.01)] * 2)
    roomy = training_data(tok, voiced, room_lead_s=0.6, room_tail_s=0.4, room_seed=1)
    assert all(51 < f <= 51 + 50 for f in roomy.frames) and (roomy.room_lead_s, roomy.room_tail_s) == (0.6, 0.4)
    silent = training_data(tok, voiced, room_lead_s=0.6, room_tail_s=0.4, room_seed=1, room_silent_share=1.0)
    assert silent.frames == roomy.frames and silent.room_silent_share == 1.0
    assert not np.array_equal(silent.features.numpy(), roomy.features.numpy())  # the same leads, heard as silence
    with pytest.raises(ForesayError, match="needs a room"):
        training_data(tok, voiced, room_silent_share=0.5)
    config = WhisperTrainConfig(steps=2, batch_size=2, warmup=1, threads=0, precision="bf16")
    train_whisper("demo-whisper-draft", config, tok, data, tmp_path / "draft", progress=quiet)
    saved = json.loads((tmp_path / "draft" / "training.json").read_text())
    assert saved["steps_done"] == 2 and saved["precision"] == "bf16"
    assert load_whisper(WhisperModelConfig(str(tmp_path / "draft"))).window_seconds == 6.0

    import torch
    from transformers import WhisperForConditionalGeneration

    # fine-tuning starts from the saved weights: one step at a negligible rate leaves them as they were
    tuned = WhisperTrainConfig(steps=1, batch_size=2, lr=1e-9, warmup=1, threads=0, precision="fp32",
                               ctc_weight=0.0, init_from=str(tmp_path / "draft"))
    train_whisper("demo-whisper-draft", tuned, tok, data, tmp_path / "tuned", progress=quiet)
    before, after = (WhisperForConditionalGeneration.from_pretrained(tmp_path / d) for d in ("draft", "tuned"))
    assert all(torch.allclose(a, b, atol=1e-3) for a, b in zip(before.state_dict().values(),
                                                               after.state_dict().values()))
    with pytest.raises(ValueError, match="not a demo-whisper of this vocabulary"):
        train_whisper("demo-whisper", tuned, tok, data, tmp_path / "wrong", progress=quiet)


def test_the_end_of_each_user_message_is_labelled_where_p_end_of_turn_is_read(chat_tokenizer):
    encoder = ChatEncoder(chat_tokenizer, default_system_prompt())
    end = encoder.end
    dialogues = DialogueGenerator(DomainConfig(seed=2), "train").dialogues(60)
    examples = encoder.training_examples(dialogues, truncate_prob=0.5, rng=random.Random(3), end_of_message=True)
    plain = encoder.training_examples(dialogues, truncate_prob=0.5, rng=random.Random(3))
    seen = {"whole": 0, "cut": 0}
    for dialogue, ex, base in zip(dialogues, examples, plain):
        assert ex.ids == base.ids  # the same sequence; only labels are added
        added = [i for i, (a, b) in enumerate(zip(ex.labels, base.labels)) if a != b]
        # one label per user message, at its closing <|im_end|>, right after the user's text
        assert len(added) == len(dialogue.turns) and all(ex.ids[i] == end for i in added)
        for i, turn in zip(added, dialogue.turns):
            said = chat_tokenizer.decode(ex.ids[:i]).rsplit("user\n", 1)[1]
            if said == turn.user or is_complete_request(said):
                assert ex.labels[i] == end
                seen["whole"] += said == turn.user
            else:  # cut mid-sentence: the next token of the words that were cut off
                assert ex.labels[i] != end
                assert turn.user.startswith(said + chat_tokenizer.decode([ex.labels[i]]).rstrip())
                seen["cut"] += 1
    assert seen["whole"] > 50 and seen["cut"] > 10


def test_whole_requests_are_told_from_cut_ones():
    assert is_complete_request("Set a timer for 5 minutes.")
    assert is_complete_request("set a timer for 5 minutes")   # a cut that is a whole request itself
    assert is_complete_request("Um, what is the capital of France please")
    assert not is_complete_request("Set a timer for")
    assert not is_complete_request("Hey Foresay, what is the capital of")
    assert not is_complete_request("what is the capital of Atlantis")


def test_auc_counts_ties_half():
    from foresay.engine.demo.evaluate_turn_end import auc
    assert auc([0.9, 0.8], [0.1]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5, 0.9], [0.5]) == 0.75
    with pytest.raises(ValueError):
        auc([], [0.1])


def test_the_whisper_commands_refuse_a_room_that_frames_nothing_before_rendering_a_clip(capsys):
    from foresay.engine.demo.whisper import main

    assert main(["train", "--out-dir", "x", "--room-silent-share", "1.5"]) == 2
    assert "--room-silent-share must lie in 0..1" in capsys.readouterr().err
    assert main(["train", "--out-dir", "x", "--room-lead-s", "0", "--room-tail-s", "0", "--room-silent-share", "0.2"]) == 2
    assert "it needs --room-lead-s or --room-tail-s" in capsys.readouterr().err
    assert main(["eval", "--silent-room"]) == 2
    assert "--silent-room frames the clips in silence" in capsys.readouterr().err
