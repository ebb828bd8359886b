"""The static KV cache: same replies as the dynamic one, exact by construction, crop semantics."""
import random

import pytest
import torch

from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.errors import ForesayError, PromptTooLong
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.static_cache import (FAST_BUCKETS, StaticEngine, StaticKVCache, choose_cache, key_spans,
                                             pass_plan, static_unsupported)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import drive_word_by_word, make_prompts

CONFIG = PredGenConfig(max_new_tokens=16, max_draft_tokens=12, margin_tokens=2,
                       splitter=SplitterConfig(max_chars=40, min_cut_chars=10))
CONTEXT = 512  # a small static cache keeps the CPU tests quick


def _pair(load_fixture_lm, seed=0):
    static = load_fixture_lm("tiny-random", seed=seed, cache="static", max_context=CONTEXT)
    dynamic = load_fixture_lm("tiny-random", seed=seed, cache="dynamic", max_context=CONTEXT)
    return static, dynamic


def _ids(lm, n, seed=0):
    rng = random.Random(seed)
    return [rng.randrange(3, len(lm.tokenizer)) for _ in range(n)]


def test_pass_plan_pads_to_buckets_and_chunks():
    assert pass_plan(1, (16,)) == [(1, 16)]
    assert pass_plan(40, (16,)) == [(16, 16), (16, 16), (8, 16)]
    assert pass_plan(1, FAST_BUCKETS) == [(1, 1)]
    assert pass_plan(17, FAST_BUCKETS) == [(17, 32)]
    assert pass_plan(300, FAST_BUCKETS) == [(128, 128), (128, 128), (44, 64)]
    assert pass_plan(300, None) == [(128, 128), (128, 128), (44, 44)]
    with pytest.raises(ValueError):
        pass_plan(0, (16,))


def test_cache_kind_selection(tiny_lm):
    from transformers import MistralConfig, Qwen2Config

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    config = tiny_lm.model.config
    assert choose_cache("auto", cpu, config) == "dynamic"
    assert choose_cache("auto", cuda, config) == "static"
    assert choose_cache("static", cpu, config) == "static"
    sliding = Qwen2Config(num_hidden_layers=2, use_sliding_window=True, sliding_window=64,
                          max_window_layers=0)
    assert "sliding" in static_unsupported(sliding)
    assert choose_cache("auto", cuda, sliding) == "dynamic"  # falls back, correct
    with pytest.raises(ForesayError, match="sliding-window"):
        choose_cache("static", cuda, sliding)
    assert static_unsupported(MistralConfig(num_hidden_layers=2, sliding_window=64)) is not None
    with pytest.raises(ForesayError, match="cache"):
        choose_cache("fast", cpu, config)


def test_conversation_takes_the_lms_cache(load_fixture_lm):
    static, dynamic = _pair(load_fixture_lm)
    assert isinstance(Conversation(static).cache, StaticKVCache)
    assert type(Conversation(dynamic).cache) is DynamicKVCache


@pytest.mark.parametrize("seed", [0, 1])
def test_static_logits_match_dynamic_and_padding_changes_nothing(load_fixture_lm, seed):
    static, dynamic = _pair(load_fixture_lm, seed)
    ids = _ids(static, 70, seed)
    reference = DynamicKVCache(dynamic).append(ids)
    for exact, sizes in ((True, None), (False, FAST_BUCKETS), (False, None)):
        engine = StaticEngine(static, exact=exact)
        if sizes is not None:
            engine.sizes = sizes  # padded buckets as on a GPU, run eagerly
        cache = engine.kv_cache()
        got = torch.cat([cache.append(ids[:1]), cache.append(ids[1:18]), cache.append(ids[18:])])
        assert torch.allclose(got, reference, atol=1e-4, rtol=1e-4), (exact, sizes)
        assert torch.equal(got.argmax(-1), reference.argmax(-1))


def test_exact_mode_is_independent_of_how_tokens_share_a_pass(load_fixture_lm):
    static, _ = _pair(load_fixture_lm)
    ids = _ids(static, 40, 3)
    whole = static.kv_cache().append(ids)
    steps = static.kv_cache()
    stepwise = torch.cat([steps.append([t]) for t in ids])
    assert torch.equal(whole, stepwise)  # bit for bit, not within a tolerance
    rng = random.Random(5)
    for _ in range(3):
        cache, rows, at = static.kv_cache(), [], 0
        while at < len(ids):
            n = rng.randint(1, 23)
            rows.append(cache.append(ids[at:at + n]))
            at += n
        assert torch.equal(torch.cat(rows), whole)
    # and after a crop into the middle, the recomputed tail is the same again
    cache = static.kv_cache()
    cache.append(ids)
    cache.crop(27)
    assert torch.equal(cache.append(ids[27:]), whole[27:])


def test_each_cache_captures_into_a_pool_of_its_own(load_fixture_lm, monkeypatch):
    """A dropped conversation's graphs must not leave later captures a pool PyTorch refuses to
    share (a pool outlives its last graph while its blocks stay cached): a pool per cache."""
    import foresay.engine.llm.static_cache as static_cache

    pools = iter(range(100))
    monkeypatch.setattr(static_cache, "graph_pool", lambda device: next(pools))
    lm = load_fixture_lm("tiny-random", cache="static", max_context=CONTEXT)
    first, second = lm.kv_cache(), lm.kv_cache()
    kept = [first.pool, second.pool]
    del first
    kept.append(lm.kv_cache().pool)
    assert len(set(kept)) == 3


def test_crop_reuse_and_bounds(load_fixture_lm):
    static, dynamic = _pair(load_fixture_lm)
    ids = _ids(static, 40, 1)
    cache = static.kv_cache()
    assert len(cache) == 0
    last = cache.append(ids, keep_logits=1)
    assert last.shape == (1, static.model.config.vocab_size) and last.dtype == torch.float32
    assert cache.tokens == ids and len(cache) == 40
    cache.crop(25)
    assert cache.tokens == ids[:25]
    other = _ids(static, 10, 9)
    fresh = DynamicKVCache(dynamic).append(ids[:25] + other)[-10:]
    assert torch.allclose(cache.append(other), fresh, atol=1e-4, rtol=1e-4)
    assert cache.sync_start(ids[:25] + other[:4] + [other[4] + 1]) == 29
    start, logits = cache.sync(ids[:25] + other[:4])  # all cached: the last one is recomputed
    assert (start, logits.shape[0], len(cache)) == (28, 1, 29)
    with pytest.raises(ValueError):
        cache.crop(30)
    with pytest.raises(ValueError):
        cache.append([])
    cache.reset()
    assert cache.tokens == []
    with pytest.raises(PromptTooLong, match="static KV cache"):
        cache.append(_ids(static, CONTEXT + 1))
    assert cache.tokens == []


def _static_greedy(lm, prompt_ids, n):
    ids, _ = greedy_reply(lm.kv_cache(), list(prompt_ids), n)
    return [t for t in ids if t not in lm.eos_ids]


@pytest.mark.parametrize("seed,conversations", [(0, 2), (1, 1), (2, 1)])
def test_predgen_on_static_cache_equals_dynamic_and_greedy_across_turns(load_fixture_lm, seed, conversations):
    static, dynamic = _pair(load_fixture_lm, seed)
    prompts = make_prompts(2 * conversations, seed)
    convs = {lm.cache_kind: Conversation(lm, reserve_tokens=64) for lm in (static, dynamic)}
    for n in range(conversations):  # conversations of two turns: history stays resident
        for conv in convs.values():
            conv.reset()
        for prompt in prompts[2 * n:2 * n + 2]:
            replies = {}
            for kind, conv in convs.items():
                turn = PredGenTurn(conv, CONFIG)
                drive_word_by_word(turn, prompt)
                turn.finish()
                replies[kind] = turn.reply_ids()
                if kind == "static":
                    assert replies[kind] == _static_greedy(static, turn.prompt.ids, CONFIG.max_new_tokens)
                    assert conv.cache.tokens[:len(conv.history_ids)] == conv.history_ids
                turn.commit()
            assert replies["static"] == replies["dynamic"], prompt


def test_llama_architecture_runs_on_the_static_cache(tiny_lm):
    from transformers import LlamaConfig, LlamaForCausalLM

    from foresay.engine.llm.model import ChatLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tiny_lm.model.config.vocab_size, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         initializer_range=0.5, max_position_embeddings=256)
    model = LlamaForCausalLM(config).eval()
    lm = ChatLM(model, tiny_lm.tokenizer, torch.device("cpu"), torch.float32, 256, "llama-tiny", cache="static")
    ids = _ids(tiny_lm, 30, 2)
    reference = DynamicKVCache(lm).append(ids)
    cache = lm.kv_cache()
    got = torch.cat([cache.append(ids[:9]), cache.append(ids[9:])])
    assert torch.allclose(got, reference, atol=1e-4, rtol=1e-4)


def test_key_spans_double_up_to_the_whole_buffer():
    assert key_spans(8320) == (1024, 2048, 4096, 8320)
    assert key_spans(32896) == (1024, 2048, 4096, 8192, 16384, 32896)
    assert key_spans(640) == (640,)
    assert key_spans(640, shortest=64) == (64, 128, 256, 640)


def _short_spans(lm, exact=True):
    engine = StaticEngine(lm, exact=exact)
    engine.spans = key_spans(engine.buffer_length, shortest=32)  # spans a CPU test can cross
    assert len(engine.spans) > 2
    return engine


def _three_passes(cache, ids):
    return torch.cat([cache.append(ids[:1]), cache.append(ids[1:70]), cache.append(ids[70:])])


def test_a_pass_attends_over_the_shortest_span_that_holds_it(load_fixture_lm):
    static, dynamic = _pair(load_fixture_lm, 2)
    ids = _ids(static, 150, 4)
    reference = DynamicKVCache(dynamic).append(ids)
    engine = _short_spans(static, exact=False)
    engine.sizes = FAST_BUCKETS
    cache = engine.kv_cache()
    got = _three_passes(cache, ids)
    assert torch.allclose(got, reference, atol=1e-4, rtol=1e-4)
    assert torch.equal(got.argmax(-1), reference.argmax(-1))
    assert sorted(cache._shapes) == [(1, 32), (128, 128), (128, 256)]
    assert cache.span_for(1) == 32 and cache.span_for(33) == 64 and cache.span_for(150) == 256
    cache.crop(20)  # a pass after a crop goes back to a short span
    assert torch.allclose(cache.append(ids[20:21]), reference[20:21], atol=1e-4, rtol=1e-4)
    assert (1, 32) in cache._shapes and len(cache._shapes) == 3


def test_exact_mode_keeps_short_spans_only_where_they_change_no_bit(load_fixture_lm):
    """Whatever the probe finds on this device, exact mode after warm-up gives the logits of the
    whole buffer bit for bit; the spans it kept are the ones the probe vouched for."""
    static, _ = _pair(load_fixture_lm, 2)
    ids = _ids(static, 150, 4)
    engine = _short_spans(static)
    invariant = engine.probe_spans()
    engine.warmup()
    assert (len(engine.spans) > 1) == invariant and engine.exact_verified is True
    whole = engine.kv_cache()
    with whole.whole_span():
        reference = _three_passes(whole, ids)
    assert torch.equal(_three_passes(engine.kv_cache(), ids), reference)


def test_the_span_probe_sees_a_kernel_that_reduces_keys_differently_at_another_length(load_fixture_lm, monkeypatch):
    static, _ = _pair(load_fixture_lm, 2)
    engine = _short_spans(static)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def length_sensitive(query, key, value, attn_mask=None, **kwargs):
        out = sdpa(query, key, value, attn_mask=attn_mask, **kwargs)
        return out + (key.shape[2] == engine.spans[-1]) * torch.finfo(out.dtype).eps * out

    import foresay.engine.llm.static_attention as static_attention
    monkeypatch.setattr(static_attention.F, "scaled_dot_product_attention", length_sensitive)
    assert engine.probe_spans() is False


def test_warmup_falls_back_to_the_whole_buffer_where_a_span_changes_the_logits(load_fixture_lm, monkeypatch, caplog):
    lm = load_fixture_lm("tiny-random", seed=4, cache="static", max_context=CONTEXT)
    engine = lm.static_engine()
    engine.spans = key_spans(engine.buffer_length, shortest=32)
    monkeypatch.setattr(StaticEngine, "probe_spans", lambda self: False)
    with caplog.at_level("WARNING"):
        lm.warmup()
    assert engine.spans == (engine.buffer_length,)
    assert engine._spare.spans == engine.spans
    assert all(span == engine.buffer_length for _, span in engine._spare._shapes)
    assert "whole KV buffer" in caplog.text and engine.exact_verified is True
    ids = _ids(lm, 30, 1)
    cache = engine.kv_cache()
    cache.append(ids)
    assert {span for _, span in cache._shapes} == {engine.buffer_length}


def test_warmup_checks_exact_mode_and_leaves_an_empty_cache_for_the_conversation(load_fixture_lm):
    lm = load_fixture_lm("tiny-random", seed=4, cache="static", max_context=CONTEXT)
    lm.warmup()
    engine = lm.static_engine()
    assert engine.exact_verified is True
    assert lm.warmup_seconds > 0
    spare = engine._spare
    conv = Conversation(lm)
    assert conv.cache is spare and conv.cache.tokens == []


def test_settings_take_the_cache_kind_and_exact_mode():
    from foresay.app.config import load_settings
    from foresay.app.settings import ConfigError

    settings = load_settings(profile="tiny-random", overrides=["llm.cache=static", "llm.exact=false"])
    assert (settings.llm.cache, settings.llm.exact) == ("static", False)
    assert load_settings(profile="gpu-24gb").llm.cache == "auto"
    with pytest.raises(ConfigError, match="cache 'fast'"):
        load_settings(profile="tiny-random", overrides=["llm.cache=fast"])
