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
    return {name: _time_shape(shape, device, dtype, repeats, context, verify) for name, shape in shapes.items()}


def _time_shape(shape: dict, device: str, dtype: str, repeats: int, context: int, verify: int) -> dict:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from foresay.engine.asr.cursor import DecoderCursor

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    config = WhisperConfig(vocab_size=51864, num_mel_bins=80, d_model=shape["d_model"],
                           encoder_layers=shape["layers"], decoder_layers=shape["layers"],
                           encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
                           encoder_ffn_dim=shape["ffn"], decoder_ffn_dim=shape["ffn"])
    model = WhisperForConditionalGeneration(config).to(device, getattr(torch, dtype)).eval()
    features = torch.randn(1, 80, 3000, device=device, dtype=model.dtype)
    with torch.inference_mode():
        encoder_out = model.model.encoder(features).last_hidden_state  # warm-up
        sync()
        started = time.perf_counter()
        for _ in range(repeats):
            encoder_out = model.model.encoder(features).last_hidden_state
        sync()
        encoder_ms = 1000 * (time.perf_counter() - started) / repeats

        def decoder_ms(n: int) -> float:
            total = 0.0
            for run in range(repeats + 1):  # run 0 warms up
                cursor = DecoderCursor(model, encoder_out)
                cursor.extend(list(range(1000, 1000 + context)))
                sync()
                started = time.perf_counter()
                cursor.extend(list(range(2000, 2000 + n)))
                sync()
                total += (time.perf_counter() - started) if run else 0.0
            return 1000 * total / repeats

        return {"encoder_ms": round(encoder_ms, 2), "decoder_pass_1_ms": round(decoder_ms(1), 3),
                f"decoder_pass_{verify}_ms": round(decoder_ms(verify), 3)}
