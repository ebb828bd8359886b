"""The committed demo models load through the ordinary paths and answer held-out requests."""
import random

import pytest

from foresay.engine.demo import models as demo_models
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.evaluate_chat import evaluate_chat
from foresay.engine.errors import ModelUnavailable
from foresay.engine.llm import LLMConfig, load_llm


@pytest.fixture(scope="module")
def demo_lm():
    return load_llm(LLMConfig(model="demo", threads=2))


def test_demo_chat_loads_like_any_model(demo_lm):
    assert type(demo_lm.model).__name__ == "Qwen2ForCausalLM"
    assert sum(p.numel() for p in demo_lm.model.parameters()) < 3_000_000
    assert "<|im_start|>assistant" in demo_lm.render([{"role": "user", "content": "hi"}], True)


def test_demo_chat_answers_held_out_requests_exactly(demo_lm):
    dialogues = DialogueGenerator(DomainConfig(seed=0), "test").dialogues(15)
    score = evaluate_chat(demo_lm, dialogues)
    assert score.turns >= 25
    assert score.accuracy >= 0.85, score.misses


def test_demo_chat_guesses_from_a_partial_request(demo_lm):
    from foresay.engine.demo.evaluate_chat import answer
    from foresay.engine.predgen.conversation import Conversation

    conv = Conversation(demo_lm)
    assert answer(conv, "What is the capital of France?") == "The capital of France is Paris."
    # cut off before its last word, the request still reads as a capital question
    assert answer(conv, "What is the capital of").startswith("The capital of ")


def test_a_missing_demo_model_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(demo_models, "demo_models_root", lambda: tmp_path)
    with pytest.raises(ModelUnavailable, match="missing.*train it"):
        load_llm(LLMConfig(model="demo"))
    with pytest.raises(ModelUnavailable, match="not a demo model"):
        demo_models.demo_model_dir("nope", demo_models.DEMO_CHAT)


@pytest.fixture(scope="module")
def held_out_speech():
    from foresay.engine.demo.speech import speak, utterances, voice_settings

    rng = random.Random(7)
    texts = utterances("test", 6, seed=11)
    return texts, [speak(t, voice_settings("test", rng), rng) for t in texts]


def test_demo_whisper_pair_transcribes_held_out_voices_and_specasr_is_lossless(held_out_speech):
    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.demo.evaluate_whisper import edit_distance, words

    greedy = build_backend(AsrConfig(target="demo", backend="greedy"))
    spec = build_backend(AsrConfig(target="demo", draft="demo-draft", backend="specasr"))
    assert greedy.window_seconds == 6.0
    errors = total = 0
    for text, clip in zip(*held_out_speech):
        reference = greedy.transcribe(clip)
        assert spec.transcribe(clip).tokens == reference.tokens
        errors += edit_distance(words(text), words(greedy.text.decode(reference.tokens)))
        total += len(words(text))
    assert errors / total <= 0.1
