"""Time single Whisper passes at real model shapes (random weights): what SpecASR trades."""
from __future__ import annotations

import time

# Decoder/encoder shapes of the English Whisper checkpoints SpecASR pairs.
WHISPER_SHAPES = {
    "medium.en": dict(d_model=1024, layers=24, heads=16, ffn=4096),
    "tiny.en": dict(d_model=384, layers=4, heads=6, ffn=1536),
}


def time_passes(device: str, shapes: dict = WHISPER_SHAPES, dtype: str = "float16", repeats: int = 10,
                context: int = 32, verify: int = 25) -> dict:
    """Per shape: encoder ms, one decoder pass of 1 token and of `verify` tokens after
    `context` cached tokens (the cost of a greedy step and of a verification)."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from foresay.engine.asr.cursor import DecoderCursor

    torch_dtype = getattr(torch, dtype)
    results = {}
    for name, shape in shapes.items():
        config = WhisperConfig(vocab_size=51864, num_mel_bins=80, d_model=shape["d_model"],
                               encoder_layers=shape["layers"], decoder_layers=shape["layers"],
                               encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
                               encoder_ffn_dim=shape["ffn"], decoder_ffn_dim=shape["ffn"])
        model = WhisperForConditionalGeneration(config).to(device, torch_dtype).eval()
        features = torch.randn(1, 80, 3000, device=device, dtype=torch_dtype)

        def timed(fn):
            fn()  # warm-up
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(repeats):
                out = fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return out, 1000 * (time.perf_counter() - started) / repeats

        with torch.inference_mode():
            encoder_out, encoder_ms = timed(lambda: model.model.encoder(features).last_hidden_state)
            tokens = list(range(1000, 1000 + context))

            def decoder_pass(n):
                def run():
                    cursor = DecoderCursor(model, encoder_out)
                    cursor.extend(tokens)
                    started = time.perf_counter()
                    cursor.extend(list(range(2000, 2000 + n)))
                    if device.startswith("cuda"):
                        torch.cuda.synchronize()
                    return time.perf_counter() - started
                return run

            one = sum(decoder_pass(1)() for _ in range(repeats)) / repeats
            many = sum(decoder_pass(verify)() for _ in range(repeats)) / repeats
        results[name] = {"encoder_ms": round(encoder_ms, 2), "decoder_pass_1_ms": round(1000 * one, 3),
                         f"decoder_pass_{verify}_ms": round(1000 * many, 3)}
        del model
    return results
