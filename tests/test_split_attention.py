"""Attention split along the keys: what one attention call gives, the same for every span, and
exact mode stays exact on it."""
import random

import pytest
import torch
import torch.nn.functional as F

import foresay.engine.llm.split_attention as split_module
from foresay.engine.llm.split_attention import split_agrees, split_attention
from foresay.engine.llm.static_attention import position_mask
from foresay.engine.llm.static_cache import StaticEngine, key_spans
from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import drive_word_by_word, make_prompts

CONTEXT = 512
CHUNK = 32  # chunks a CPU test can cross


@pytest.fixture
def short_chunks(monkeypatch):
    monkeypatch.setattr(split_module, "CHUNK", CHUNK)


def _inputs(span, rows, dtype, seed=0, kv_heads=2, groups=3, dim=16):
    generator = torch.Generator().manual_seed(seed)

    def random_(*shape):
        return torch.randn(shape, generator=generator).to(dtype)

    query = random_(1, kv_heads, groups * rows, dim)
    keys, values = random_(1, kv_heads, span, dim), random_(1, kv_heads, span, dim)
    return query, keys, values, groups


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_split_attention_gives_what_one_attention_call_gives(short_chunks, dtype, atol):
    span, rows = 4 * CHUNK, 8
    query, keys, values, groups = _inputs(span, rows, dtype)
    # rows in the first chunk only, at a chunk's edges, and seeing every key
    pos = torch.tensor([0, 5, CHUNK - 1, CHUNK, 2 * CHUNK + 3, 3 * CHUNK - 1, 3 * CHUNK, span - 1])
    mask = position_mask(torch.arange(span), pos, dtype, groups)
    got = split_attention(query, keys, values, mask)
    plain = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask)
    assert got.shape == plain.shape and got.dtype == dtype
    assert torch.allclose(got.float(), plain.float(), atol=atol, rtol=0)
    assert split_agrees(query, keys, values, mask)


def test_a_longer_span_adds_only_masked_chunks_and_changes_no_bit(short_chunks):
    span, rows = 2 * CHUNK, 8
    query, keys, values, groups = _inputs(4 * span, rows, torch.bfloat16, seed=1)
    pos = torch.arange(span - rows, span)
    outs = [split_attention(query, keys[:, :, :longer], values[:, :, :longer],
                            position_mask(torch.arange(longer), pos, torch.bfloat16, groups))
            for longer in (span, 2 * span, 4 * span)]
    assert all(torch.equal(outs[0], out) for out in outs[1:])


def test_the_merge_sums_as_a_fixed_tree_that_appended_zeros_cannot_regroup():
    from foresay.engine.llm.split_attention import tree_sum
    x = torch.tensor([[1e8, 1.0, -1e8, 1.0, 3.0]], dtype=torch.float32)[..., None]
    # float32 halves: [1e8 + 3 = 1e8, 1, -1e8, 1] -> [0, 2] -> 2 (in order: 1e8 + 1 = 1e8, ... -> 4)
    assert tree_sum(x).item() == 2.0
    for extra in (1, 3, 11):
        padded = torch.cat([x, torch.zeros(1, extra, 1)], dim=1)
        assert torch.equal(tree_sum(padded), tree_sum(x))
    assert torch.equal(tree_sum(x[:, :1]), x[:, 0])


def test_a_span_that_is_not_whole_chunks_is_refused(short_chunks):
    query, keys, values, groups = _inputs(CHUNK + 8, 4, torch.float32)
    mask = position_mask(torch.arange(CHUNK + 8), torch.arange(4), torch.float32, groups)
    with pytest.raises(ValueError, match="multiple of"):
        split_attention(query, keys, values, mask)


def test_the_agreement_check_sees_a_kernel_whose_log_sum_exp_is_not_natural(short_chunks, monkeypatch):
    query, keys, values, groups = _inputs(4 * CHUNK, 8, torch.float32, seed=2)
    mask = position_mask(torch.arange(4 * CHUNK), torch.arange(3 * CHUNK, 3 * CHUNK + 8), torch.float32, groups)
    assert split_agrees(query, keys, values, mask)
    real = split_module.chunk_outputs

    def base_two(*args, **kwargs):
        out, lse = real(*args, **kwargs)
        return out, lse / torch.log(torch.tensor(2.0))

    monkeypatch.setattr(split_module, "chunk_outputs", base_two)
    assert not split_agrees(query, keys, values, mask)


def _split_engine(lm):
    engine = lm.static_engine()
    engine.split = True
    engine.spans = key_spans(engine.buffer_length, shortest=CHUNK)
    assert len(engine.spans) > 2
    return engine


def _ids(lm, n, seed=0):
    rng = random.Random(seed)
    return [rng.randrange(3, len(lm.tokenizer)) for _ in range(n)]


def test_exact_mode_with_split_attention_is_exact_and_matches_the_whole_buffer(load_fixture_lm, short_chunks):
    lm = load_fixture_lm("tiny-random", seed=3, cache="static", max_context=CONTEXT)
    engine = _split_engine(lm)
    engine.warmup()
    assert engine.split and engine.exact_verified is True
    assert len(engine.spans) > 2  # the spans held: masked chunks add exact zeros
    ids = _ids(lm, 150, 4)
    whole = engine.kv_cache().append(ids)
    steps = engine.kv_cache()
    stepwise = torch.cat([steps.append(ids[:100])] + [steps.append([t]) for t in ids[100:]])
    assert torch.equal(whole, stepwise)
    reference = engine.kv_cache()
    with reference.whole_span():
        assert torch.equal(reference.append(ids), whole)
    plain = load_fixture_lm("tiny-random", seed=3, cache="dynamic", max_context=CONTEXT)
    from foresay.engine.llm.dynamic_cache import DynamicKVCache
    assert torch.allclose(whole, DynamicKVCache(plain).append(ids), atol=1e-4, rtol=1e-4)


def test_predgen_greedy_equals_greedy_decoding_with_split_attention(load_fixture_lm, short_chunks):
    lm = load_fixture_lm("tiny-random", seed=5, cache="static", max_context=CONTEXT)
    engine = _split_engine(lm)
    engine.warmup()
    assert engine.split
    config = PredGenConfig(max_new_tokens=16, max_draft_tokens=12, margin_tokens=2,
                           splitter=SplitterConfig(max_chars=40, min_cut_chars=10))
    conv = Conversation(lm, reserve_tokens=64)
    for prompt in make_prompts(2, 7):  # two turns: the history stays resident
        turn = PredGenTurn(conv, config)
        drive_word_by_word(turn, prompt)
        turn.finish()
        greedy, _ = greedy_reply(lm.kv_cache(), list(turn.prompt.ids), config.max_new_tokens)
        assert turn.reply_ids() == [t for t in greedy if t not in lm.eos_ids]
        turn.commit()


def test_warmup_attends_in_one_call_where_split_attention_fails_its_probe(load_fixture_lm, short_chunks,
                                                                         monkeypatch, caplog):
    lm = load_fixture_lm("tiny-random", seed=3, cache="static", max_context=CONTEXT)
    engine = _split_engine(lm)

    def missing(*args, **kwargs):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(split_module, "chunk_outputs", missing)
    with caplog.at_level("WARNING"):
        lm.warmup()
    assert engine.split is False and engine.exact_verified is True
    assert "not split" in caplog.text
    cache = engine.kv_cache()
    cache.append(_ids(lm, 20))  # the passes run the plain attention


def test_the_split_setting_turns_it_on_off_or_leaves_it_to_the_device(fixture_dir):
    from foresay.engine.errors import ForesayError
    from foresay.engine.llm.backend import load_llm
    from foresay.engine.llm.config import LLMConfig

    def engine(**kw):
        return load_llm(LLMConfig(model="tiny-random", device="cpu", max_context=128, **kw)).static_engine()

    assert engine(cache="static").split is False  # auto: CUDA only
    assert engine(cache="static", split="on").split is True
    assert engine(cache="static", split="off").split is False
    with pytest.raises(ForesayError, match="split = 'on' needs the static cache in exact mode"):
        load_llm(LLMConfig(model="tiny-random", device="cpu", cache="static", exact=False, split="on"))
    with pytest.raises(ForesayError, match="split = 'on' needs the static cache"):
        load_llm(LLMConfig(model="tiny-random", device="cpu", cache="dynamic", split="on"))
    with pytest.raises(ForesayError, match="split 'sometimes' is not one of auto, on, off"):
        LLMConfig(model="tiny-random", split="sometimes")
