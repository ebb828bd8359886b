"""Time single Qwen3-ASR passes at real model shapes (random weights): what SpecASR trades there.

Shapes: the 1.7B model's are transformers' Qwen3ASRConfig defaults (a Qwen3-1.7B decoder); the
0.6B model's decoder is Qwen3-0.6B's and its encoder (896 wide, 18 layers, 14 heads) is as Qwen
describe it. Both unverified against the checkpoints here (no hub); the figures are pass costs,
not accuracy.
"""
from __future__ import annotations

import time

QWEN3_ASR_SHAPES = {
    "Qwen3-ASR-1.7B": dict(audio=dict(d_model=1024, encoder_layers=24, encoder_attention_heads=16,
                                      encoder_ffn_dim=4096, output_dim=2048),
                           text=dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                                     num_attention_heads=16, num_key_value_heads=8, head_dim=128)),
    "Qwen3-ASR-0.6B": dict(audio=dict(d_model=896, encoder_layers=18, encoder_attention_heads=14,
                                      encoder_ffn_dim=3584, output_dim=1024),
                           text=dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                     num_attention_heads=16, num_key_value_heads=8, head_dim=128)),
}


def time_llm_passes(device: str, shapes: dict = QWEN3_ASR_SHAPES, dtype: str = "bfloat16", repeats: int = 10,
                    audio_s: float = 10.0, verify: int = 25, vocab: int = 151936) -> dict:
    """Per shape: encoder ms for `audio_s` of audio, the prefill (audio embeddings + prompt), and
    one decoder pass of 1 token and of `verify` tokens after it."""
    return {name: _time_shape(shape, device, dtype, repeats, audio_s, verify, vocab) for name, shape in shapes.items()}


def _time_shape(shape: dict, device: str, dtype: str, repeats: int, audio_s: float, verify: int, vocab: int) -> dict:
    import numpy as np
    import torch
    from transformers import Qwen3ASRConfig, Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration

    from foresay.engine.asr.llm.cursor import LlmCursor

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def timed(run) -> float:
        run()  # warm-up
        sync()
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        sync()
        return 1000 * (time.perf_counter() - started) / repeats

    config = Qwen3ASRConfig(audio_config=shape["audio"],
                            text_config={"model_type": "qwen3", "vocab_size": vocab, **shape["text"]})
    model = Qwen3ASRForConditionalGeneration(config).to(device, getattr(torch, dtype)).eval()
    audio = np.random.default_rng(0).standard_normal(int(16000 * audio_s)).astype(np.float32) * 0.1
    feats = Qwen3ASRFeatureExtractor(feature_size=config.audio_config.num_mel_bins)(
        audio, sampling_rate=16000, padding="longest", return_attention_mask=True, return_tensors="pt")
    features, mask = feats.input_features.to(device, model.dtype), feats.attention_mask.to(device)
    with torch.inference_mode():
        def encode():
            return model.model.get_audio_features(features, mask).pooler_output

        encoder_ms = timed(encode)
        embeds = encode()
        prompt = model.model.get_input_embeddings()(torch.arange(100, 130, device=device) % vocab)
        context = torch.cat([prompt, embeds])
        prefill_ms = timed(lambda: LlmCursor(model, context))

        def decoder_ms(n: int) -> float:
            cursors = [LlmCursor(model, context) for _ in range(repeats + 1)]
            return timed(lambda: cursors.pop().extend([t % vocab for t in range(1000, 1000 + n)]))

        return {"audio_tokens": int(embeds.shape[0]), "encoder_ms": round(encoder_ms, 2),
                "prefill_ms": round(prefill_ms, 2), "decoder_pass_1_ms": round(decoder_ms(1), 3),
                f"decoder_pass_{verify}_ms": round(decoder_ms(verify), 3)}
