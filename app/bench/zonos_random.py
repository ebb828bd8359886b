"""Zonos v0.1 with random weights at its real shapes: its costs where its weights cannot be had.

`random_zonos_folder(dest, small)` writes a model folder that `ZonosConfig(model_id=FOLDER)` loads
through Foresay's own path: the transformer checkpoint's config.json and a model.safetensors that
holds no tensor, so Zonos's loader keeps the freshly initialized weights. `offline_zonos(small)`
gives Zonos a randomly initialized DAC 44.1 kHz codec of the real layout in place of the one it
fetches from the hub. Random weights give costs, not speech: such a model rarely ends on its own,
so generation runs to `ZonosConfig.max_seconds`.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

# The published Zonos-v0.1-transformer checkpoint: a 26-layer pure-attention backbone (LayerNorm,
# GQA 16/4 heads of 128, MLP 8192), conditioned by phonemes, speaker, emotion, fmax, pitch,
# speaking rate and language.
CONDITIONERS = [
    {"type": "EspeakPhonemeConditioner", "name": "espeak"},
    {"type": "PassthroughConditioner", "name": "speaker", "cond_dim": 128, "uncond_type": "learned",
     "projection": "linear"},
    {"type": "FourierConditioner", "name": "emotion", "input_dim": 8, "uncond_type": "learned"},
    {"type": "FourierConditioner", "name": "fmax", "min_val": 0, "max_val": 24000, "uncond_type": "learned"},
    {"type": "FourierConditioner", "name": "pitch_std", "min_val": 0, "max_val": 400, "uncond_type": "learned"},
    {"type": "FourierConditioner", "name": "speaking_rate", "min_val": 0, "max_val": 40, "uncond_type": "learned"},
    {"type": "IntegerConditioner", "name": "language_id", "min_val": -1, "max_val": 126, "uncond_type": "learned"},
]


def zonos_config(small: bool = False) -> dict:
    """The transformer checkpoint's config.json; `small`: the same layout at toy width and depth."""
    d_model, layers, heads, kv_heads, mlp = (256, 2, 4, 1, 512) if small else (2048, 26, 16, 4, 8192)
    return {
        "backbone": {
            "d_model": d_model, "d_intermediate": 0, "attn_mlp_d_intermediate": mlp, "n_layer": layers,
            "ssm_cfg": {}, "attn_layer_idx": list(range(layers)),
            "attn_cfg": {"causal": True, "num_heads": heads, "num_heads_kv": kv_heads,
                         "rotary_emb_dim": d_model // heads, "qkv_proj_bias": False, "out_proj_bias": False},
            "rms_norm": False, "residual_in_fp32": False, "norm_epsilon": 1e-5,
        },
        "prefix_conditioner": {"conditioners": CONDITIONERS, "projection": "linear"},
        "eos_token_id": 1024,
        "masked_token_id": 1025,
    }


def random_zonos_folder(dest: Path, small: bool = False) -> Path:
    """`dest` holding config.json and a model.safetensors without tensors (random weights)."""
    from safetensors.torch import save_file

    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(zonos_config(small), indent=1))
    save_file({}, str(dest / "model.safetensors"))
    return dest


def codec_config(small: bool = False):
    """DAC 44.1 kHz: 9 codebooks of 1024 codes, a 512-sample hop; `small`: narrower layers."""
    from transformers import DacConfig

    encoder, decoder = (8, 32) if small else (64, 1536)
    return DacConfig(encoder_hidden_size=encoder, decoder_hidden_size=decoder, downsampling_ratios=[2, 4, 8, 8],
                     n_codebooks=9, codebook_size=1024, codebook_dim=8, sampling_rate=44100)


class NoJapaneseDictionary:
    """Stands in for sudachipy's `Dictionary` where its full dictionary (over 60 MB, which Zonos
    opens when it is imported, to normalize Japanese) cannot travel: English needs none of it."""

    def __init__(self, *args, **kwargs):
        pass

    def create(self, *args, **kwargs):
        return self

    def tokenize(self, *args, **kwargs):
        raise RuntimeError("Japanese text normalization needs sudachidict_full, which is not installed here")


@contextmanager
def offline_zonos(small: bool = False):
    """While open, `DacModel.from_pretrained` (Zonos's codec loader) builds a random codec of
    `codec_config(small)` instead of reading the hub, and without sudachidict_full Zonos imports
    with `NoJapaneseDictionary`. Import Zonos inside it."""
    import importlib.util
    from contextlib import ExitStack
    from unittest import mock

    from transformers import DacModel

    def random_codec(*args, **kwargs):
        return DacModel(codec_config(small))

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(DacModel, "from_pretrained", random_codec))
        if importlib.util.find_spec("sudachidict_full") is None and importlib.util.find_spec("sudachipy"):
            import sudachipy

            stack.enter_context(mock.patch.object(sudachipy, "Dictionary", NoJapaneseDictionary))
        yield
