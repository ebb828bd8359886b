"""The demo Whisper as a teacher for the demo LLM-ASR encoder: its layers, copied, compute in the
student what they computed in the teacher; each student frame is pulled towards the teacher's
states at the same time in the clip; training with a teacher learns and saves a loadable model."""
import numpy as np
import pytest
import torch

from foresay.engine.demo.llm_asr_teacher import TeacherStates, aligned_targets, copy_encoder_layers


def _pair(width=64, layers=2, ffn=128, student_layers=2):
    from transformers import Qwen3ASRForConditionalGeneration, WhisperConfig, WhisperForConditionalGeneration

    from foresay.engine.asr.llm.fixtures import LlmFixtureRecipe, build_tokenizer, qwen3_asr_config

    torch.manual_seed(0)
    teacher = WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=64, pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=1,
        num_mel_bins=80, d_model=width, encoder_layers=layers, decoder_layers=1,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        max_source_positions=150, max_target_positions=32, init_std=0.5)).eval()
    config = qwen3_asr_config(build_tokenizer(200), LlmFixtureRecipe(seed=0, text_tokens=200, vocab_rows=512,
                                                                     audio_d_model=width, audio_layers=student_layers))
    config.audio_config.encoder_ffn_dim = ffn
    return teacher, Qwen3ASRForConditionalGeneration(config).eval()


def test_copied_layers_compute_what_the_teachers_did():
    teacher, student = _pair()
    tower = student.model.audio_tower
    copy_encoder_layers(teacher, tower)
    hidden = torch.randn(1, 13, 64)
    with torch.no_grad():
        expected = hidden
        for layer in teacher.model.encoder.layers:
            expected = layer(expected, attention_mask=None)
            expected = expected[0] if isinstance(expected, tuple) else expected
        expected = teacher.model.encoder.layer_norm(expected)[0]
        got = hidden[0]
        cu = torch.tensor([0, 13], dtype=torch.int32)
        for layer in tower.layers:
            got = layer(got, cu)[0]
        got = tower.ln_post(got)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_copy_refuses_an_encoder_of_another_shape():
    teacher, student = _pair(student_layers=3)
    with pytest.raises(ValueError, match="differ"):
        copy_encoder_layers(teacher, student.model.audio_tower)


def test_each_student_frame_gets_the_teachers_states_at_its_time():
    states = torch.arange(60, dtype=torch.float32)[:, None].expand(60, 2)  # state k = k (frame at 40 ms)
    teacher = TeacherStates([states.to(torch.float16)], "unused")
    # 26 student frames: two 1 s chunks of 13 frames at 80 ms; frame j of chunk c is centred at c + 0.08 j + 0.04 s
    got = aligned_targets(teacher, [0], [26], [0])[:, 0]
    centre = torch.tensor([c + 0.08 * j + 0.04 for c in range(2) for j in range(13)])
    torch.testing.assert_close(got, centre / 0.04 - 0.5, atol=0.51, rtol=0)  # the mean of the two 40 ms frames around it
    assert got[13] == 25.5  # the second chunk starts at 1 s: teacher frames 25 and 26 (mean 25.5)
    shifted = aligned_targets(teacher, [0], [26], [8])[:, 0]  # 80 ms of padding before the speech
    assert shifted[0] == 0.0 and torch.equal(shifted[1:13], got[0:12])
    assert aligned_targets(teacher, [0], [40], [0])[-1, 0] == 59.0  # past the teacher's states: its last one


def test_training_with_a_teacher_learns_and_saves_a_loadable_recognizer(tmp_path):
    from foresay.engine.asr.backends import DecodeLimits
    from foresay.engine.asr.factory import AsrConfig, build_backend
    from foresay.engine.demo import train_llm_asr as trainer
    from foresay.engine.demo.speech import SpeechSet
    from foresay.engine.demo.llm_asr_teacher import teacher_states
    from foresay.engine.demo.train_whisper import save_whisper, build_whisper_tokenizer

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    texts = ["what's the capital of japan", "set a timer for five minutes", "hello there", "what colour is the sky"]
    audio = [(rng.standard_normal(16000 + 4000 * i) * 0.1).astype(np.float32) for i in range(len(texts))]
    teacher, _ = _pair(width=96, layers=2, ffn=384)
    save_whisper(teacher, build_whisper_tokenizer(texts * 20), tmp_path / "teacher")
    states = teacher_states(tmp_path / "teacher", audio)
    assert [tuple(s.shape) for s in states.states] == [(27, 96), (33, 96), (39, 96), (45, 96)]  # 40 ms frames of speech
    tok = trainer.build_tokenizer(texts * 20)
    data = trainer.training_data(tok, SpeechSet(texts, audio, [None] * len(texts)))
    lines = []
    config = trainer.LlmAsrTrainConfig(steps=50, stop_at=10, batch_size=4, warmup=1, lr=3e-3, threads=1, log_every=1,
                                       ctc_warmup=3, distill_weight=1.0)
    trainer.train_llm_asr("demo-llm-asr-draft", config, tok, data, tmp_path / "model", lines.append, states)
    losses = [float(line.split("loss ")[1].split()[0]) for line in lines]
    assert len(losses) == 10 and losses[-1] < 0.7 * losses[0]  # running means: the encoder alone, then all
    backend = build_backend(AsrConfig(target=str(tmp_path / "model"), backend="llm-greedy", limits=DecodeLimits(6)))
    assert backend.transcribe(audio[0]).stats.target_passes >= 2
    with pytest.raises(Exception, match="teacher states must cover every clip"):
        trainer.train_llm_asr("demo-llm-asr-draft", config, tok, data, tmp_path / "x", lines.append,
                              TeacherStates(states.states[:2], states.folder))
