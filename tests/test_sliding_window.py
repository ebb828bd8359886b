"""PredGen on a sliding-window model (Gemma-3 architecture, window of 8 tokens): every crop and
every reused prefix crosses the window, and greedy PredGen stays token-identical to greedy."""
import pytest
import torch

from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import cold_greedy, drive_word_by_word, make_prompts

CONFIG = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2,
                       splitter=SplitterConfig(max_chars=40, min_cut_chars=10))


@pytest.fixture(scope="module")
def sliding_lm(load_fixture_lm):
    return load_fixture_lm("tiny-sliding")


def test_the_fixture_mixes_sliding_and_full_layers_with_a_small_window(sliding_lm):
    cache = sliding_lm.kv_cache()
    kinds = [type(layer).__name__ for layer in cache._cache.layers]
    assert kinds == ["GrowableSlidingLayer", "GrowableLayer"] * 2
    assert sliding_lm.model.config.sliding_window == 8


def test_cropped_cache_gives_the_logits_of_a_cold_pass(sliding_lm):
    ids = sliding_lm.encode("please tell me about the weather in Paris tomorrow morning and in Tokyo "
                            "on Friday, then set a timer for ten minutes")
    assert len(ids) > 3 * 8
    with torch.inference_mode():
        reference = sliding_lm.model(torch.tensor([ids])).logits[0].float()
    cache = sliding_lm.kv_cache()
    cache.append(ids)
    for keep in (len(ids) - 1, 20, 9, 8, 7, 3, 0):  # across, at and below the window
        cache.crop(keep)
        rows = cache.append(ids[keep:])
        torch.testing.assert_close(rows, reference[keep:], atol=1e-4, rtol=1e-4)
    cache.crop(5)  # one token at a time after a crop, as decoding does
    for i in range(5, len(ids)):
        row = cache.append([ids[i]], keep_logits=1)
        torch.testing.assert_close(row[0], reference[i], atol=1e-4, rtol=1e-4)


def test_greedy_predgen_equals_plain_greedy_word_by_word(sliding_lm):
    for prompt in make_prompts(12, seed=3):
        turn = PredGenTurn(Conversation(sliding_lm), CONFIG)
        drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(sliding_lm, turn.prompt.ids, CONFIG.max_new_tokens), prompt


def test_system_prompt_joins_the_first_user_message(sliding_lm):
    assert not sliding_lm.system_role  # the fixture's template raises on a system message
    conv = Conversation(sliding_lm, system_prompt="You are brief.")
    prompt = conv.prompt("what time is it")
    assert prompt.text.startswith("<bos><start_of_turn>user\nYou are brief.\n\nwhat time is it<end_of_turn>")
    assert sliding_lm.tokenizer.convert_ids_to_tokens(prompt.ids[prompt.end_of_message]) == "<end_of_turn>"
    assert sliding_lm.tokenizer.convert_tokens_to_ids("<end_of_turn>") in sliding_lm.eos_ids


def test_long_conversation_reuses_history_across_the_window(load_fixture_lm):
    lm = load_fixture_lm("tiny-sliding", max_context=400)
    conv = Conversation(lm, reserve_tokens=32)
    for i in range(7):
        turn = PredGenTurn(conv, CONFIG)
        drive_word_by_word(turn, f"turn {i} tell me about the weather in Paris and Berlin please")
        turn.finish()
        # the whole prompt, history included, decoded from scratch without any cache reuse
        fresh_ids, _ = greedy_reply(lm.kv_cache(), list(turn.prompt.ids), CONFIG.max_new_tokens)
        assert turn.reply_ids() == [t for t in fresh_ids if t not in lm.eos_ids], i
        turn.commit()
    assert conv.dropped_turns > 0  # the context overflowed: the oldest turns left, cache rebuilt
    assert len(turn.prompt.ids) > 10 * 8


def test_layers_that_cannot_be_cut_back_recompute_the_kept_prefix(tiny_lm, monkeypatch):
    """A cache with a layer kind engine.llm.dynamic_cache does not know (recurrent state, say) is rebuilt on a
    crop: slower, still exact."""
    import foresay.engine.llm.dynamic_cache as kv
    plain = kv.growable_transformers_cache
    monkeypatch.setattr(kv, "growable_transformers_cache", lambda lm: (plain(lm)[0], False))
    for prompt in make_prompts(3, seed=7):
        turn = PredGenTurn(Conversation(tiny_lm), CONFIG)
        drive_word_by_word(turn, prompt)
        turn.finish()
        monkeypatch.setattr(kv, "growable_transformers_cache", plain)
        assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, CONFIG.max_new_tokens), prompt
        monkeypatch.setattr(kv, "growable_transformers_cache", lambda lm: (plain(lm)[0], False))
    cache = kv.DynamicKVCache(tiny_lm)
    cache.append(list(range(5, 40)))
    passes = tiny_lm.stats.passes
    cache.crop(20)
    assert cache.tokens == list(range(5, 25)) and tiny_lm.stats.passes == passes + 1
