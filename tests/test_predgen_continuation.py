"""Continuations after the final verification: plain steps and Jacobi iteration seeded with the
stale draft. Both must reproduce plain greedy decoding exactly, and keep the cache at prompt +
accepted tokens after every pass."""
import pytest

from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.errors import ForesayError
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.predgen.continuation import (ContinuationConfig, FixedWindow, GiveUpWhenSlow,
                                                 JacobiFromDraft, PlainSteps)
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import advance_until, cold_greedy, drive_word_by_word, make_prompts, turns_with_history

SHORT = SplitterConfig(max_chars=40, min_cut_chars=10)


def _config(spec, **kw):
    base = dict(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT)
    return PredGenConfig(**(base | kw), continuation=ContinuationConfig.parse(spec))


@pytest.mark.parametrize("seed,count,spec", [(0, 24, "jacobi"), (1, 8, "jacobi:2"), (2, 8, "jacobi:6:fill"),
                                             (3, 8, "jacobi:16:fill"), (4, 8, "jacobi:4")])
def test_jacobi_predgen_equals_plain_greedy(load_fixture_lm, seed, count, spec):
    lm = load_fixture_lm("tiny-random", seed=seed)
    config = _config(spec)
    for prompt in make_prompts(count, seed + 10):
        turn = PredGenTurn(Conversation(lm), config)
        record = drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(lm, turn.prompt.ids, config.max_new_tokens), prompt
        assert record.continuation.strategy == "jacobi"


FINAL = "tell me about the weather in Paris"


def _greedy(lm, n=24):
    return cold_greedy(lm, Conversation(lm).prompt(FINAL).ids, n)


def _forced(lm, draft, spec):
    turn = PredGenTurn(Conversation(lm), _config(spec))
    turn.adopt_draft("tell me about the weather in", draft)
    return turn


def test_one_wrong_token_costs_one_jacobi_pass_not_one_pass_per_token(tiny_lm):
    """The paper's Figure 2b: the draft is right but for one token; the stale tail after the
    corrected token is confirmed in a single pass."""
    greedy = _greedy(tiny_lm)
    wrong = (greedy[3] + 1) % tiny_lm.model.config.vocab_size
    draft = greedy[:3] + [wrong] + greedy[4:16]
    records = {}
    for spec in ("plain", "jacobi"):
        turn = _forced(tiny_lm, draft, spec)
        records[spec] = turn.finalize(FINAL)
        turn.finish()
        assert turn.reply_ids() == greedy
        assert records[spec].final_accepted == 3
    jacobi = records["jacobi"].continuation
    assert jacobi.guessed == 12 and jacobi.tokens == 13 and jacobi.passes == 1
    assert records["jacobi"].nfetfs == 2  # verification + one Jacobi pass
    assert records["plain"].nfetfs > 2
    assert records["plain"].first_sentence == records["jacobi"].first_sentence


def test_every_pass_leaves_prompt_plus_accepted_tokens_in_the_cache(tiny_lm):
    prompt = list(Conversation(tiny_lm).prompt(FINAL).ids)
    greedy = _greedy(tiny_lm, 30)
    # guesses right for a while, then shifted by one (a word inserted), then noise
    guesses = greedy[1:6] + [5] + greedy[6:14] + [7, 8, 9]
    for strategy in (JacobiFromDraft(guesses, FixedWindow(5)), JacobiFromDraft(guesses, FixedWindow(8, fill=True)),
                     PlainSteps()):
        cache = DynamicKVCache(tiny_lm)
        start, logits = cache.sync(prompt)
        for tokens, pending, _ in advance_until(strategy, cache, int(logits[-1].argmax()), 30):
            assert cache.tokens == prompt + tokens
            assert tokens + [pending] == greedy[:len(tokens) + 1]
        assert len(tokens) + 1 == 30  # the budget is respected exactly
        assert strategy.stats.tokens == len(tokens) and strategy.stats.passes >= 1


def test_slow_convergence_falls_back_to_plain_steps(tiny_lm):
    greedy = _greedy(tiny_lm, 24)
    noise = [(t + 3) % tiny_lm.model.config.vocab_size for t in greedy]
    prompt = list(Conversation(tiny_lm).prompt(FINAL).ids)
    cache = DynamicKVCache(tiny_lm)
    _, logits = cache.sync(prompt)
    strategy = JacobiFromDraft(noise[1:], FixedWindow(6, fill=True), GiveUpWhenSlow(patience=2, min_gain=1))
    computed = []
    for tokens, pending, step in advance_until(strategy, cache, int(logits[-1].argmax()), 24):
        computed.append(step.computed)
    assert tokens + [pending] == greedy
    gave_up = strategy.stats.gave_up_at
    assert gave_up is not None
    assert all(c == 1 for c in computed[gave_up:])  # plain steps after giving up
    assert GiveUpWhenSlow(patience=0).give_up([0, 0, 0]) is False
    assert GiveUpWhenSlow(patience=2, min_gain=2).give_up([5, 1, 1]) is True
    assert GiveUpWhenSlow(patience=2, min_gain=2).give_up([1, 2]) is False


@pytest.fixture(scope="module")
def demo_lm():
    return load_llm(LLMConfig(model="demo", threads=2))


def test_jacobi_on_the_demo_model_equals_greedy_with_history(demo_lm):
    """Held-out requests, word by word, earlier turns kept as history; replies end with the
    end-of-message token, which Jacobi may confirm inside its guesses."""
    config = PredGenConfig(max_new_tokens=64, continuation=ContinuationConfig.parse("jacobi"))
    dialogues = DialogueGenerator(DomainConfig(seed=3), "test").dialogues(10)
    ended_inside_guesses = 0
    for turn, text, reference in turns_with_history(demo_lm, config, dialogues):
        assert turn.draft == reference, text  # the end-of-message token included
        ended_inside_guesses += turn.continuation.stats.guessed > 0 and turn.complete
    assert ended_inside_guesses > 0


def test_continuation_specs():
    assert ContinuationConfig.parse("jacobi:8:fill") == ContinuationConfig("jacobi", window=8, fill=True)
    assert ContinuationConfig.parse("jacobi::fill").spec == "jacobi:16:fill"
    assert ContinuationConfig.parse("plain").spec == "plain"
    for bad in ("jacobi:x", "jacobi:1", "plain:4", "jacobi:4:fast", "lookahead"):
        with pytest.raises(ForesayError):
            ContinuationConfig.parse(bad)


def test_app_settings_choose_the_continuation():
    from foresay.app.config import PredGenSettings
    from foresay.app.settings import ConfigError

    assert PredGenSettings().engine_config().continuation.kind == "jacobi"
    assert PredGenSettings(continuation="jacobi:8:fill").engine_config().continuation == \
        ContinuationConfig("jacobi", window=8, fill=True)
    assert PredGenSettings(continuation="plain").engine_config().continuation.kind == "plain"
    with pytest.raises(ConfigError, match="continuation"):
        PredGenSettings(continuation="jacobi:x")


def test_bench_method_names():
    from foresay.app.bench.predgen import split_method
    from foresay.app.cli import main

    assert split_method("jacobi") == ("greedy", "jacobi")
    assert split_method("jacobi:8:fill") == ("greedy", "jacobi:8:fill")
    assert split_method("topk:3+jacobi") == ("topk:3", "jacobi")
    assert split_method("greedy") == ("greedy", "plain")
    assert main(["bench", "predgen", "--model", "tiny-random", "--methods", "greedy+jacobi:0"]) == 2
