"""Speculative Streaming as PredGen's continuation: one multi-stream pass verifies the previous
draft and proposes the next. The reply must equal the model's own greedy decoding whatever the
stream embeddings are (random ones here), and the cache must hold exactly prompt + accepted
tokens after every pass: stream positions and rejected drafts never stay in it."""
from dataclasses import replace

import pytest
import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.predgen.continuation import ContinuationConfig, GiveUpWhenSlow
from foresay.engine.predgen.strategies import prepare_continuation
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.stream_model import StreamHeads, StreamsSpec, multi_stream_forward
from foresay.engine.predgen.streams import SpeculativeStreams, attach_stream_heads
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import advance_until, cold_greedy, drive_word_by_word, make_prompts, turns_with_history

SHORT = SplitterConfig(max_chars=40, min_cut_chars=10)
FINAL = "tell me about the weather in Paris"


def _random_heads(lm, spec, seed):
    """Random embeddings and, with a rank, random adapters (both halves: no adapter is a no-op)."""
    heads = StreamHeads.random(spec, lm.model.config.hidden_size, seed=seed, model=lm.model)
    with torch.no_grad():
        for b in heads.b.values():
            b.normal_(0, 0.3)
    return heads


def _streams_lm(load_fixture_lm, seed, spec=StreamsSpec(3, 1)):
    lm = load_fixture_lm("tiny-random", seed=seed)
    attach_stream_heads(lm, _random_heads(lm, spec, seed))
    return lm


@pytest.mark.parametrize("seed,count,spec,layers,rank", [(20, 2, "streams", 1, 0), (21, 2, "streams:2", 2, 4),
                                                         (22, 2, "streams:1", 1, 2)])
def test_streams_predgen_equals_plain_greedy(load_fixture_lm, seed, count, spec, layers, rank):
    lm = _streams_lm(load_fixture_lm, seed, StreamsSpec(3, layers, rank))
    never_give_up = replace(ContinuationConfig.parse(spec), patience=0)  # streams on every pass
    config = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT,
                           continuation=never_give_up)
    for prompt in make_prompts(count, seed):
        turn = PredGenTurn(Conversation(lm), config)
        record = drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(lm, turn.prompt.ids, config.max_new_tokens), prompt
        assert record.continuation.strategy == "streams" and record.continuation.gave_up_at is None


def _greedy_from(lm, prompt, n):
    cache = DynamicKVCache(lm)
    _, logits = cache.sync(prompt)
    return cache, int(logits[-1].argmax())


def test_every_pass_leaves_prompt_plus_accepted_tokens_in_the_cache(load_fixture_lm):
    lm = _streams_lm(load_fixture_lm, 24)
    prompt = list(Conversation(lm).prompt(FINAL).ids)
    greedy = cold_greedy(lm, prompt, 30)
    assert len(greedy) == 30
    for stale, give_up in ((greedy[1:4], GiveUpWhenSlow(0)), ([5, 6, 7], GiveUpWhenSlow(2)), ([], GiveUpWhenSlow())):
        cache, pending = _greedy_from(lm, prompt, 30)
        strategy = SpeculativeStreams(lm, lm_heads(lm), stale, give_up=give_up)
        for tokens, pending, step in advance_until(strategy, cache, pending, 30):
            assert cache.tokens == prompt + tokens
            assert tokens + [pending] == greedy[:len(tokens) + 1]
            assert step.computed <= 1 + 3
        assert len(tokens) + 1 == 30  # the budget is respected exactly
        assert strategy.stats.tokens == len(tokens)
    # a right stale draft is confirmed whole in the first pass
    cache, pending = _greedy_from(lm, prompt, 30)
    first = SpeculativeStreams(lm, lm_heads(lm), greedy[1:4]).advance(cache, [], pending, 29)
    assert first.accepted == tuple(greedy[:4]) and first.guessed == 3 and first.pending == greedy[4]


def lm_heads(lm):
    from foresay.engine.predgen.streams import stream_heads
    return stream_heads(lm)


def test_when_every_draft_fails_it_falls_back_to_plain_steps(load_fixture_lm):
    lm = _streams_lm(load_fixture_lm, 24)
    prompt = list(Conversation(lm).prompt(FINAL).ids)
    greedy = cold_greedy(lm, prompt, 24)
    cache, pending = _greedy_from(lm, prompt, 24)
    strategy = SpeculativeStreams(lm, lm_heads(lm), [], give_up=GiveUpWhenSlow(patience=2, min_gain=4))
    computed = []
    for tokens, pending, step in advance_until(strategy, cache, pending, 24):
        computed.append(step.computed)
    assert tokens + [pending] == greedy
    gave_up = strategy.stats.gave_up_at
    assert gave_up == 3  # the first pass has no draft; two passes confirming < 4 each
    assert all(c == 1 for c in computed[gave_up:])


def test_the_best_case_drafts_the_reply_itself_and_pays_for_the_streams(load_fixture_lm):
    """`train_streams eval`'s best case: the streams still run, their drafts are the plain reply."""
    from foresay.engine.demo.streams_eval import run_turn

    lm = _streams_lm(load_fixture_lm, 28)
    config = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT,
                           continuation=replace(ContinuationConfig.parse("streams"), patience=0))
    plain = run_turn(lm, replace(config, continuation=ContinuationConfig()), "tell me about", FINAL)
    real = run_turn(lm, config, "tell me about", FINAL)
    best = run_turn(lm, config, "tell me about", FINAL, best_for=plain.reply)
    assert plain.outcome in ("partial", "rejected") and best.outcome == plain.outcome
    assert best.reply == real.reply == plain.reply
    proposed = best.stats.computed - best.stats.passes
    assert proposed > 0 and best.stats.guessed >= proposed - 1  # only an end of reply is never confirmed
    assert real.stats.guessed < best.stats.guessed and best.stats.passes < plain.stats.passes


def test_the_main_stream_is_the_models_own_forward_and_streams_never_see_the_future(load_fixture_lm):
    lm = _streams_lm(load_fixture_lm, 25, StreamsSpec(3, 2, rank=4))
    model, heads = lm.model, lm_heads(lm)
    ids = lm.encode("a few words to run through the model, and some more")
    plain, streamed = lm.transformers_cache(), lm.transformers_cache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids[:6]]), past_key_values=plain, use_cache=True)
        reference = model(input_ids=torch.tensor([ids[6:]]), past_key_values=plain, use_cache=True).logits
        multi_stream_forward(model, heads, streamed, torch.tensor([ids[:6]]))
        main, streams = multi_stream_forward(model, heads, streamed, torch.tensor([ids[6:]]))
        assert torch.equal(model.lm_head(main), reference)  # bit for bit
        assert streamed.get_seq_length() == len(ids)  # no stream position was stored
        for layer_p, layer_s in zip(plain.layers, streamed.layers):
            assert torch.equal(layer_p.keys, layer_s.keys)
        streamed.crop(-(len(ids) - 6))  # the same pass on a shorter input: earlier streams unchanged
        _, shorter = multi_stream_forward(model, heads, streamed, torch.tensor([ids[6:len(ids) - 3]]))
        assert torch.allclose(shorter[0], streams[0, :shorter.shape[1]], atol=1e-5)
        joint_cache = lm.transformers_cache()  # the runtime's one-call-per-layer pass: the same sums, up to rounding
        multi_stream_forward(model, heads, joint_cache, torch.tensor([ids[:6]]), joint=True)
        main_j, streams_j = multi_stream_forward(model, heads, joint_cache, torch.tensor([ids[6:]]), joint=True)
        assert joint_cache.get_seq_length() == len(ids)
        assert torch.allclose(main_j, main, atol=1e-5) and torch.allclose(streams_j, streams, atol=1e-5)
        for layer_p, layer_j in zip(plain.layers, joint_cache.layers):
            assert torch.allclose(layer_p.keys, layer_j.keys, atol=1e-5)
        other = _random_heads(lm, heads.spec, seed=99)
        streamed.crop(-(streamed.get_seq_length() - 6))
        main2, streams2 = multi_stream_forward(model, other, streamed, torch.tensor([ids[6:]]))
        assert torch.equal(main2, main) and not torch.allclose(streams2, streams)


def test_continuation_specs_and_clear_errors(load_fixture_lm, tmp_path):
    assert ContinuationConfig.parse("streams") == ContinuationConfig("streams")
    assert ContinuationConfig.parse("streams:2").spec == "streams:2"
    assert ContinuationConfig.parse("streams").spec == "streams"
    for bad in ("streams:0", "streams:x", "streams:2:fill"):
        with pytest.raises(ForesayError, match="streams"):
            ContinuationConfig.parse(bad)
    bare = load_fixture_lm("tiny-random", seed=26)
    with pytest.raises(ForesayError, match="demo-streams"):
        prepare_continuation(ContinuationConfig.parse("streams"), bare)
    prepare_continuation(ContinuationConfig.parse("jacobi"), bare)
    lm = _streams_lm(load_fixture_lm, 27)
    prepare_continuation(ContinuationConfig.parse("streams:3"), lm)
    with pytest.raises(ForesayError, match="1 to 3"):
        prepare_continuation(ContinuationConfig.parse("streams:4"), lm)
    heads = _random_heads(lm, StreamsSpec(2, 1, rank=3), seed=1)
    heads.save(tmp_path)
    again = StreamHeads.load(tmp_path)
    assert again.spec == heads.spec and again.state_dict().keys() == heads.state_dict().keys()
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in heads.state_dict().items())
    with pytest.raises(ForesayError, match="do not fit"):
        attach_stream_heads(lm, StreamHeads.random(StreamsSpec(2, 1), 16, seed=1))
    sliding = load_fixture_lm("tiny-sliding")
    with pytest.raises(ForesayError, match="sliding-window layers"):
        attach_stream_heads(sliding, StreamHeads.random(StreamsSpec(2, 1), sliding.model.config.hidden_size))
    with pytest.raises(ForesayError, match="do not fit"):
        attach_stream_heads(lm, StreamHeads(StreamsSpec(2, 1, rank=3), 64, {"0__self_attn__q_proj": (64, 64)}))


def test_settings_and_bench_accept_streams():
    from foresay.app.bench.predgen import split_method
    from foresay.app.config import PredGenSettings

    assert PredGenSettings(continuation="streams:2").engine_config().continuation == \
        ContinuationConfig("streams", draft=2)
    assert split_method("greedy+streams") == ("greedy", "streams")


def test_the_shipped_streams_model_decodes_losslessly_and_its_streams_help():
    """demo-streams: the demo model's weights (the main stream) plus trained streams; on held-out
    requests with history, drafted from each request cut two words short, the reply equals its
    greedy decoding, and the streams' drafts are accepted (random ones almost never are)."""
    from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.backend import load_llm

    lm = load_llm(LLMConfig(model="demo-streams", threads=2))
    config = PredGenConfig(max_new_tokens=48, continuation=ContinuationConfig.parse("streams"))
    confirmed = proposed = 0

    def drafted_from_a_cut_off_request(turn, text):
        turn.update(" ".join(text.split()[:-2]) or text, 1)
        turn.finalize(text)

    dialogues = DialogueGenerator(DomainConfig(seed=6), "test").dialogues(2)
    for turn, text, reference in turns_with_history(lm, config, dialogues, drive=drafted_from_a_cut_off_request):
        assert turn.draft == reference, text
        stats = turn.continuation.stats
        confirmed, proposed = confirmed + stats.guessed, proposed + stats.computed - stats.passes
    assert proposed and confirmed / proposed > 0.15  # held out, 120 requests: 49%; random streams: 6%
