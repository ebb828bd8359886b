"""Zonos at its real shapes with random weights (the GPU kit's Zonos section): the model folder
loads through Zonos's own loader with no tensor in it, and the codec comes without the hub."""
import json

import pytest

from foresay.app.bench.zonos_random import (NoJapaneseDictionary, codec_config, offline_zonos,
                                            random_zonos_folder, zonos_config)


def test_the_folder_holds_the_real_config_and_no_weights(tmp_path):
    from safetensors import safe_open

    folder = random_zonos_folder(tmp_path / "zonos")
    config = json.loads((folder / "config.json").read_text())
    backbone = config["backbone"]
    assert (backbone["d_model"], backbone["n_layer"], backbone["attn_mlp_d_intermediate"]) == (2048, 26, 8192)
    assert backbone["attn_layer_idx"] == list(range(26)) and not backbone["ssm_cfg"]  # the transformer model
    heads = backbone["attn_cfg"]
    assert (heads["num_heads"], heads["num_heads_kv"], heads["rotary_emb_dim"]) == (16, 4, 128)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as weights:
        assert list(weights.keys()) == []
    small = zonos_config(small=True)["backbone"]
    assert small["d_model"] // small["attn_cfg"]["num_heads"] == small["attn_cfg"]["rotary_emb_dim"]
    assert [c["name"] for c in zonos_config(True)["prefix_conditioner"]["conditioners"]] == \
        [c["name"] for c in config["prefix_conditioner"]["conditioners"]]


@pytest.mark.parametrize("small", [True, False])
def test_the_codec_has_the_real_layout(small):
    config = codec_config(small)
    assert (config.sampling_rate, config.hop_length, config.n_codebooks, config.codebook_size) == (44100, 512, 9, 1024)


def test_the_codec_is_built_not_fetched_while_open_and_fetched_again_after():
    from transformers import DacModel

    original = DacModel.from_pretrained
    with offline_zonos(small=True):
        codec = DacModel.from_pretrained("descript/dac_44khz")
    assert isinstance(codec, DacModel) and codec.config.sampling_rate == 44100
    assert codec.quantizer.n_codebooks == 9
    assert DacModel.from_pretrained == original


def test_japanese_normalization_says_what_is_missing():
    tokenizer = NoJapaneseDictionary(dict="full").create()
    with pytest.raises(RuntimeError, match="sudachidict_full"):
        tokenizer.tokenize("こんにちは")
