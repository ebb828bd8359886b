"""The committed demo models load through the ordinary paths and answer held-out requests."""
import pytest

from foresay.engine.demo import models as demo_models
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.demo.evaluate_chat import evaluate_chat
from foresay.engine.errors import ModelUnavailable
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm


@pytest.fixture(scope="module")
def demo_lm():
    return load_llm(LLMConfig(model="demo", threads=2))


def test_demo_chat_loads_like_any_model(demo_lm):
    assert type(demo_lm.model).__name__ == "Qwen2ForCausalLM"
    assert sum(p.numel() for p in demo_lm.model.parameters()) < 3_000_000
    assert "<|im_start|>assistant" in demo_lm.render([{"role": "user", "content": "hi"}], True)


def test_demo_chat_answers_held_out_requests_exactly(demo_lm):
    # the card's score is over 200 dialogues (92%); these first 80 (155 requests) score 89%
    dialogues = DialogueGenerator(DomainConfig(seed=0), "test").dialogues(80)
    score = evaluate_chat(demo_lm, dialogues)
    assert score.turns >= 150
    assert score.accuracy >= 0.85, score.misses[:5]


def test_demo_chat_guesses_from_a_partial_request(demo_lm):
    from foresay.engine.demo.evaluate_chat import answer
    from foresay.engine.predgen.conversation import Conversation

    conv = Conversation(demo_lm)
    assert answer(conv, "What is the capital of France?") == "The capital of France is Paris."
    # cut off before its last word, the request still reads as a capital question
    assert answer(conv, "What is the capital of").startswith("The capital of ")


def test_a_missing_demo_model_says_how_to_get_it(monkeypatch, tmp_path):
    from foresay.engine import model_registry
    monkeypatch.setattr(model_registry, "shipped_models_root", lambda: tmp_path)
    with pytest.raises(ModelUnavailable, match="missing.*train it"):
        load_llm(LLMConfig(model="demo"))
    with pytest.raises(ModelUnavailable, match="not a shipped model"):
        demo_models.demo_model_dir("nope", demo_models.DEMO_CHAT)


def test_demo_whisper_layout_loads_through_the_asr_layer(tmp_path):
    """An (untrained) demo-shaped Whisper saved by the trainer loads and decodes like any Whisper:
    6 s window at 20 ms hops, the domain vocabulary with Whisper's specials after it."""
    import numpy as np
    import torch
    from transformers import WhisperForConditionalGeneration

    from foresay.engine.asr.backends import GreedyBackend
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper
    from foresay.engine.demo.speech import utterances
    from foresay.engine.demo.train_whisper import (SHAPES, SPECIAL_TOKENS, _config, build_whisper_tokenizer,
                                                   features, save_whisper, token_rows)

    texts = utterances("train", 300, seed=0)
    tok = build_whisper_tokenizer(texts)
    specials = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    assert specials == list(range(tok.get_vocab_size() - len(SPECIAL_TOKENS), tok.get_vocab_size()))
    rows = token_rows(tok, texts[:3])
    assert tok.decode(rows[0][2:-1]).strip() == texts[0]
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(_config(SHAPES["demo-whisper-draft"], tok)).eval()
    save_whisper(model, tok, tmp_path / "w")
    loaded = load_whisper(WhisperModelConfig(str(tmp_path / "w")))
    assert loaded.window_seconds == 6.0 and loaded.vocab.first_special == specials[0]
    clip = np.zeros(16_000, dtype=np.float32)
    assert torch.allclose(loaded.features(clip).float(), features([clip]).float(), atol=1e-2)
    backend = GreedyBackend(loaded)
    assert backend.window_seconds == 6.0
    assert all(t < loaded.vocab.first_special for t in backend.transcribe(clip).tokens)
