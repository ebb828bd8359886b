"""The demo LLM-ASR trainer: it learns (the loss falls on a few clips) and saves a folder that the
ordinary loading path reads as a Qwen3-ASR recognizer; its command line refuses bad options."""
import json

import numpy as np
import pytest

from foresay.engine.demo.speech import SpeechSet


def test_a_few_steps_learn_and_save_a_loadable_recognizer(tmp_path):
    import torch

    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.demo.train_llm_asr import LlmAsrTrainConfig, build_tokenizer, train_llm_asr, training_data

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    texts = ["what's the capital of japan", "set a timer for five minutes", "hello there", "what colour is the sky"]
    audio = [(rng.standard_normal(16000 + 4000 * i) * 0.1).astype(np.float32) for i in range(len(texts))]
    tok = build_tokenizer(texts * 20)
    data = training_data(tok, SpeechSet(texts, audio, [None] * len(texts)))
    lines = []
    config = LlmAsrTrainConfig(steps=50, stop_at=8, batch_size=4, warmup=1, lr=3e-3, threads=1, log_every=1)
    stats = train_llm_asr("demo-llm-asr-draft", config, tok, data, tmp_path / "model", lines.append)
    losses = [float(line.split("loss ")[1].split()[0]) for line in lines]
    assert len(losses) == 8 and stats["steps_done"] == 8
    assert json.loads((tmp_path / "model" / "training.json").read_text())["steps_done"] == 8
    assert losses[-1] < 0.8 * losses[0]
    from foresay.engine.asr.backends import DecodeLimits

    backend = build_backend(AsrConfig(target=str(tmp_path / "model"), backend="llm-greedy", limits=DecodeLimits(6)))
    assert backend.transcribe(audio[0]).stats.target_passes >= 2


def test_command_line_refuses_bad_options(capsys):
    from foresay.engine.demo.llm_asr import main

    with pytest.raises(SystemExit):
        main(["train", "--out-dir", "x", "--clips", "0"])
    assert main(["train", "--out-dir", "x", "--clips", "10", "--prefix-clips", "20"]) == 2
    assert "--prefix-clips must lie in 0..--clips" in capsys.readouterr().err


def test_decoder_depth_is_a_knob_and_every_checkpoint_is_handed_on(tmp_path):
    import torch

    from foresay.engine.demo.train_llm_asr import LlmAsrTrainConfig, build_tokenizer, train_llm_asr, training_data

    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    texts = ["hello there", "what colour is the sky"]
    audio = [(rng.standard_normal(16000) * 0.1).astype(np.float32) for _ in texts]
    tok = build_tokenizer(texts * 20)
    data = training_data(tok, SpeechSet(texts, audio, [None] * len(texts)))
    seen = []
    config = LlmAsrTrainConfig(steps=4, batch_size=2, warmup=1, threads=1, checkpoint_every=2, decoder_layers=2)
    train_llm_asr("demo-llm-asr-draft", config, tok, data, tmp_path / "m", lambda _: None,
                  on_checkpoint=lambda out, stats: seen.append((out, stats["steps_done"])))
    assert seen == [(tmp_path / "m", 2), (tmp_path / "m", 4)]
    assert json.loads((tmp_path / "m" / "config.json").read_text())["text_config"]["num_hidden_layers"] == 2
    assert json.loads((tmp_path / "m" / "training.json").read_text())["shape"]["layers"] == 2
    with pytest.raises(Exception, match="decoder_layers must be >= 1"):
        LlmAsrTrainConfig(decoder_layers=0)


def test_augmentation_adds_silence_after_the_speech_and_the_prompt_follows():
    import torch

    from foresay.engine.asr.llm.models import PromptLayout
    from foresay.engine.demo.augment import AugmentConfig
    from foresay.engine.demo.train_llm_asr import (VOCAB_ROWS, LlmAsrTrainConfig, audio_tokens, batch_inputs,
                                                   build_tokenizer, training_data)

    rng = np.random.default_rng(2)
    texts = ["hello there", "what colour is the sky"]
    audio = [(rng.standard_normal(12000) * 0.1).astype(np.float32) for _ in texts]
    tok = build_tokenizer(texts * 20)
    data = training_data(tok, SpeechSet(texts, audio, [None] * len(texts)))
    layout = PromptLayout.from_tokenizer(tok, VOCAB_ROWS, "English")
    plain = [int(f.shape[1]) for f in data.features]
    quiet = AugmentConfig(max_shift=0, warp=0.0, freq_mask=0, time_mask=0, time_masks=0, max_tail=300)
    config = LlmAsrTrainConfig(augmentation=quiet)
    inputs = batch_inputs([0, 1], data, layout, tok.token_to_id("<|audio_pad|>"), config, torch.Generator().manual_seed(0))
    valid = inputs["input_features_mask"].sum(1)
    assert all(v >= p for v, p in zip(valid.tolist(), plain)) and valid.tolist() != plain
    for row, length in zip(range(2), valid):
        tail = inputs["input_features"][row, :, plain[row]:int(length)]
        assert torch.all(tail == data.features[row].float().min())  # silence: the clip's floor
    placeholders = (inputs["input_ids"] == tok.token_to_id("<|audio_pad|>")).sum(1)
    assert placeholders.tolist() == audio_tokens(valid).tolist() == inputs["n_audio"]
