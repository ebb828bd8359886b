import pytest
import torch

from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.llm.model import pick_dtype


def test_fixture_is_deterministic_and_does_not_collapse(tiny_lm, load_fixture_lm):
    assert 100_000 < sum(p.numel() for p in tiny_lm.model.parameters()) < 1_000_000
    assert type(tiny_lm.tokenizer).__name__ == "Qwen2Tokenizer"  # rebuilt by AutoTokenizer, still right
    text = "What is the weather in Paris? Ça va, 東京!"
    assert tiny_lm.decode(tiny_lm.encode(text)) == text
    ids = tiny_lm.encode(tiny_lm.render([{"role": "user", "content": "hello"}], True))
    cache = DynamicKVCache(tiny_lm)
    logits = cache.append(ids)
    out = []
    for _ in range(40):
        out.append(int(logits[-1].argmax()))
        logits = cache.append([out[-1]])
    assert len(set(out)) > 15  # a wide init wanders over the vocabulary
    other = load_fixture_lm("tiny-random", seed=1)
    assert not torch.equal(other.model.lm_head.weight, tiny_lm.model.lm_head.weight)


def test_small_random_is_tens_of_millions(load_fixture_lm):
    small = load_fixture_lm("small-random")
    assert 10_000_000 < sum(p.numel() for p in small.model.parameters()) < 100_000_000


def test_crop_then_append_equals_cold_computation(tiny_lm):
    ids = tiny_lm.encode("one two three four five six seven eight nine ten")
    other = tiny_lm.encode(" alpha beta gamma")
    cache = DynamicKVCache(tiny_lm)
    cache.append(ids)
    cache.crop(4)
    assert len(cache) == 4 and cache.tokens == ids[:4]
    warm = cache.append(other)
    cold = DynamicKVCache(tiny_lm).append(ids[:4] + other)[-len(other):]
    assert torch.allclose(warm, cold, atol=1e-5)
    start, _ = cache.sync(ids[:4] + other)  # everything cached: only the last position recomputed
    assert start == len(cache) - 1
    with pytest.raises(ValueError):
        cache.crop(len(cache) + 1)


def test_missing_model_gives_a_clear_message(fixture_dir, tmp_path):
    with pytest.raises(ModelUnavailable, match="not in the local cache.*tiny-random"):
        load_llm(LLMConfig(model="nobody/no-such-model"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_llm(LLMConfig(model=str(tmp_path / "missing" / "model")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="no config.json"):
        load_llm(LLMConfig(model=str(tmp_path / "empty")))


def test_config_validation_and_dtype_choice():
    with pytest.raises(ForesayError, match="dtype"):
        LLMConfig(model="x", dtype="float8")
    with pytest.raises(ForesayError, match="device"):
        LLMConfig(model="x", device="tpu")
    with pytest.raises(ForesayError, match="model"):
        LLMConfig(model=" ")
    assert pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert pick_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16
    if not torch.cuda.is_available():
        with pytest.raises(ForesayError, match="no CUDA"):
            load_llm(LLMConfig(model="tiny-random", device="cuda"))


def test_warmup_and_eos(tiny_lm):
    tiny_lm.warmup()
    assert tiny_lm.tokenizer.convert_tokens_to_ids("<|im_end|>") in tiny_lm.eos_ids


def test_full_size_shape_fixture_writes_no_weights(fixture_dir):
    from foresay.engine.llm.fixtures import FIXTURES, ensure_fixture
    folder = ensure_fixture("qwen2.5-7b-random")
    assert not FIXTURES["qwen2.5-7b-random"].weights_on_disk
    assert (folder / "config.json").exists() and not list(folder.glob("*.safetensors"))
    import json
    config = json.loads((folder / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (3584, 28, 152064)
