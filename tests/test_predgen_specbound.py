"""SpecBound: early-exit self-drafting after the final verification. Whatever the heads propose,
the reply equals plain greedy decoding, and after every round each layer's cache holds exactly
prompt + accepted tokens."""
import copy

import pytest
import torch

from foresay.app.bench.continuation import ReplyOracle, best_case_methods
from foresay.engine.llm.decoding import greedy_reply
from foresay.engine.demo.dialogues import DialogueGenerator, DomainConfig
from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.model import ChatLM
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.backend import load_llm
from foresay.engine.predgen.continuation import ContinuationConfig, GiveUpWhenSlow
from foresay.engine.predgen.strategies import make_continuation
from foresay.engine.predgen.conversation import Conversation
from foresay.engine.predgen.exit_heads import ExitHeads, attach_exit_heads, load_exit_heads
from foresay.engine.predgen.specbound import Bounds, SpecBound
from foresay.engine.predgen.turn import PredGenConfig, PredGenTurn
from foresay.engine.sentences import SplitterConfig

from predgen_helpers import advance_until, cold_greedy, drive_word_by_word, make_prompts, turns_with_history

SHORT = SplitterConfig(max_chars=40, min_cut_chars=10)
FINAL = "tell me about the weather in Paris"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, above all on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _random_heads(lm, layers, seed, rank=8):
    """Heads with random adapters: confident, often wrong proposals."""
    torch.manual_seed(seed)
    heads = ExitHeads(lm, layers, rank)
    with torch.no_grad():
        for up in heads.up:
            up.normal_(0, 0.3)
    return heads.requires_grad_(False)


@pytest.fixture(scope="module")
def deep_lm(tiny_lm):
    """tiny-random's vocabulary and template, four decoder layers (exits after 1, 2, 3)."""
    config = copy.deepcopy(tiny_lm.model.config)
    config.num_hidden_layers = 4
    config.layer_types = ["full_attention"] * 4
    from transformers import AutoModelForCausalLM
    torch.manual_seed(11)
    model = AutoModelForCausalLM.from_config(config).eval()
    lm = ChatLM(model, tiny_lm.tokenizer, torch.device("cpu"), torch.float32, tiny_lm.max_context, "deep-random")
    attach_exit_heads(lm, _random_heads(lm, (1, 2, 3), seed=1))
    return lm


def _config(spec, **kw):
    base = dict(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT)
    return PredGenConfig(**(base | kw), continuation=ContinuationConfig.parse(spec))


@pytest.mark.parametrize("seed,spec", [(0, "specbound:6::0.05"), (1, "specbound:2:1:0.05"),
                                       (2, "specbound:4:2:0.3")])
def test_specbound_predgen_equals_plain_greedy(deep_lm, seed, spec):
    attach_exit_heads(deep_lm, _random_heads(deep_lm, (1, 2, 3), seed))
    config = _config(spec)
    drafted = 0
    for prompt in make_prompts(4, seed + 20):
        turn = PredGenTurn(Conversation(deep_lm), config)
        record = drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(deep_lm, turn.prompt.ids, config.max_new_tokens), prompt
        assert record.continuation.strategy == "specbound"
        drafted += turn.continuation.bound.drafted
    assert drafted > 0  # the heads did draft: the proof is not about plain steps


def test_two_layer_model_with_one_exit_equals_greedy(tiny_lm):
    attach_exit_heads(tiny_lm, _random_heads(tiny_lm, (1,), seed=5))
    config = _config("specbound:5::0.05")
    for prompt in make_prompts(3, 40):
        turn = PredGenTurn(Conversation(tiny_lm), config)
        drive_word_by_word(turn, prompt)
        turn.finish()
        assert turn.reply_ids() == cold_greedy(tiny_lm, turn.prompt.ids, config.max_new_tokens), prompt


def _run(lm, strategy, n):
    """Decode n tokens with `strategy`, checking the cache invariant after every round."""
    prompt = list(Conversation(lm).prompt(FINAL).ids)
    cache = DynamicKVCache(lm)
    _, logits = cache.sync(prompt)
    if hasattr(strategy.heads, "bind"):
        strategy.heads.bind(cache, len(prompt))
    for tokens, pending, _ in advance_until(strategy, cache, int(logits[-1].argmax()), n):
        assert cache.tokens == prompt + tokens
        assert [layer.get_seq_length() for layer in cache._cache.layers] == [len(cache)] * 4
    assert len(tokens) + 1 == n  # the budget is respected exactly
    return tokens + [pending], prompt


class _Wrong:
    def __init__(self, heads, token):
        self.exit_layers, self.temperatures, self.token = heads.exit_layers, heads.temperatures, token

    def confidence(self, i, hidden):
        return self.token, 1.0


def test_right_drafts_fill_the_width_and_wrong_ones_cost_nothing_but_time(deep_lm):
    heads = _random_heads(deep_lm, (1, 2, 3), seed=2)
    greedy = cold_greedy(deep_lm, Conversation(deep_lm).prompt(FINAL).ids, 30)
    assert len(greedy) == 30
    # perfect heads: every round drafts W tokens, all confirmed, each exiting at the first exit
    strategy = SpecBound(deep_lm, heads, Bounds(width=4, threshold=0.9))
    strategy.heads = ReplyOracle(heads, greedy, min(deep_lm.eos_ids))  # the bench's best case
    out, _ = _run(deep_lm, strategy, 30)
    assert out == greedy
    b = strategy.bound
    assert b.confirmed == b.drafted == 5 * 4 + 3 and b.rounds == 6  # 5 tokens a round, the last 4
    assert b.exits == ((1, 23),) and b.stopped_by_width == 6
    assert strategy.stats.passes == 23 + 6  # a draft step per draft, a completion pass per round
    # always-wrong heads: lossless; after `patience` rounds without a confirmed draft, plain steps
    wrong = next(t for t in range(100) if t not in greedy)
    strategy = SpecBound(deep_lm, heads, Bounds(width=3), GiveUpWhenSlow(patience=2, min_gain=1))
    strategy.heads = _Wrong(heads, wrong)
    out, _ = _run(deep_lm, strategy, 30)
    assert out == greedy
    assert strategy.bound.confirmed == 0 and strategy.bound.rounds == 2
    assert strategy.stats.gave_up_at == 2 * 4  # two rounds of 3 draft steps + a completion pass
    never = SpecBound(deep_lm, heads, Bounds(width=3), GiveUpWhenSlow(patience=0))
    never.heads = _Wrong(heads, wrong)
    assert _run(deep_lm, never, 30)[0] == greedy
    assert never.bound.rounds == 29 and never.bound.drafted == 3 * 26 + 2 + 1


def test_bench_best_case_drafts_the_greedy_reply_perfectly(deep_lm):
    """`--best-case`: the twin of a greedy SpecBound method whose heads know the baseline's reply
    drafts every token right at the first exit (only the end of the reply is never confirmed)."""
    from foresay.app.bench.predgen import run_methods

    methods = ["baseline", "greedy+specbound:4::0.05"]
    methods += best_case_methods(methods)
    assert methods[-1] == "greedy+specbound:4::0.05@best"
    config = PredGenConfig(max_new_tokens=24, max_draft_tokens=20, margin_tokens=2, splitter=SHORT)
    conversations = [[FINAL, "and what about tomorrow in Rome"], ["how long do I boil an egg"]]
    results = run_methods(deep_lm, methods, conversations, config, chars_per_s=400)
    best = [r for conv in results[methods[-1]] for r in conv]
    real = [r for conv in results[methods[1]] for r in conv]
    assert [r.reply for r in best] == [r.reply for conv in results["baseline"] for r in conv]
    assert all(r.drafting is not None for r in best)
    for b, r in zip(best, real):
        d = b.drafting
        assert d.drafted - d.confirmed <= 1 and d.exits == ((1, d.drafted),), d
        assert d.confirmed >= r.drafting.confirmed
    assert sum(r.drafting.drafted - r.drafting.confirmed for r in real) > 0  # random heads: wrong drafts
    assert load_exit_heads(deep_lm).__class__ is ExitHeads  # the model keeps its own heads
    with pytest.raises(ForesayError, match="best-case"):
        best_case_methods(["baseline", "greedy+plain", "topk:3+specbound"])


def test_depth_bound_stops_drafting_and_heads_past_it_are_never_asked(deep_lm):
    heads = _random_heads(deep_lm, (1, 2, 3), seed=3)
    greedy = cold_greedy(deep_lm, Conversation(deep_lm).prompt(FINAL).ids, 20)
    strategy = SpecBound(deep_lm, heads, Bounds(width=6, depth=2, threshold=1.0))  # nothing exits
    assert _run(deep_lm, strategy, 20)[0] == greedy
    # every round stops at the depth bound but the last (a budget of one token: no drafting), and
    # rounds without drafts never count towards giving up
    assert strategy.bound.drafted == 0 and strategy.bound.stopped_by_depth == strategy.bound.rounds - 1 == 18
    assert strategy.stats.gave_up_at is None
    low = SpecBound(deep_lm, heads, Bounds(width=6, depth=2, threshold=0.01))
    assert _run(deep_lm, low, 20)[0] == greedy
    assert {layer for layer, _ in low.bound.exits} <= {1, 2} and low.bound.drafted > 0
    with pytest.raises(ForesayError, match="depth bound"):
        SpecBound(deep_lm, ExitHeads(deep_lm, (2, 3)), Bounds(depth=1))


@pytest.fixture(scope="module")
def demo_lm():
    lm = load_llm(LLMConfig(model="demo", threads=1))
    load_exit_heads(lm)
    return lm


def test_shipped_heads_on_the_demo_model_equal_greedy_with_history(demo_lm):
    """Held-out requests, word by word, earlier turns kept as history, with the shipped heads."""
    config = PredGenConfig(max_new_tokens=64, continuation=ContinuationConfig.parse("specbound"))
    dialogues = DialogueGenerator(DomainConfig(seed=5), "test").dialogues(6)
    for turn, text, reference in turns_with_history(demo_lm, config, dialogues):
        assert turn.draft == reference, text  # the end-of-message token included
    # whole replies from the first token on: the shipped heads are worth running
    strategy = make_continuation(ContinuationConfig.parse("specbound"), [], demo_lm)
    for dialogue in DialogueGenerator(DomainConfig(seed=6), "test").dialogues(6):
        prompt = list(Conversation(demo_lm).prompt(dialogue.turns[0].user).ids)
        reference, _ = greedy_reply(DynamicKVCache(demo_lm), prompt, 64)
        cache = DynamicKVCache(demo_lm)
        _, logits = cache.sync(prompt)
        tokens, pending = [], int(logits[-1].argmax())
        while pending not in demo_lm.eos_ids:
            step = strategy.advance(cache, tokens, pending, 64 - len(tokens) - 1)
            tokens, pending = tokens + list(step.accepted), step.pending
        assert tokens + [pending] == reference
    bound = strategy.bound
    assert bound.acceptance > 0.5 and (bound.confirmed + bound.rounds) / bound.rounds > 2.5, bound


def test_heads_file_round_trip_and_clear_errors(tmp_path, tiny_lm, deep_lm, load_fixture_lm):
    heads = _random_heads(deep_lm, (1, 3), seed=4)
    heads.set_temperatures((1.2, 1.5))
    assert heads.temperatures == (1.5, 1.5)  # annealed: a shallow head never trusted more
    path = tmp_path / "specbound.safetensors"
    heads.save(path)
    loaded = load_exit_heads(deep_lm, path)
    hidden = torch.randn(1, 1, deep_lm.model.config.hidden_size)
    assert loaded.exit_layers == (1, 3) and loaded.confidence(1, hidden) == heads.confidence(1, hidden)
    with pytest.raises(ForesayError, match="another model"):
        load_exit_heads(tiny_lm, path)
    other = load_fixture_lm("tiny-random", seed=3)  # its folder holds no heads
    with pytest.raises(ModelUnavailable, match="train_specbound"):
        PredGenTurn(Conversation(other), _config("specbound"))
    with pytest.raises(ForesayError, match="exit layers"):
        ExitHeads(deep_lm, (2, 1))
    with pytest.raises(ForesayError, match="needs the model"):
        make_continuation(ContinuationConfig.parse("specbound"), [])


def test_unsupported_models_are_refused(load_fixture_lm):
    sliding = load_fixture_lm("tiny-sliding")
    with pytest.raises(ForesayError, match="SpecBound cannot run"):
        SpecBound(sliding, None)
    with pytest.raises(ForesayError, match="specbound continuation cannot run tiny-sliding"):
        PredGenTurn(Conversation(sliding), _config("specbound"))


def test_specs_settings_and_bench_option():
    from foresay.app.bench.continuation import apply_continuation, continuation_spec
    from foresay.app.config import PredGenSettings
    from foresay.app.settings import ConfigError

    assert ContinuationConfig.parse("specbound:4:2") == ContinuationConfig("specbound", width=4, depth=2)
    assert ContinuationConfig.parse("specbound::2:0.8").threshold == 0.8
    spec = ContinuationConfig.parse("specbound:4").spec
    assert ContinuationConfig.parse(spec) == ContinuationConfig("specbound", width=4)
    for bad in ("specbound:x", "specbound:0", "specbound:4:0", "specbound:4:2:1.5", "specbound:1:2:0.5:9",
                "specbound:4:2:high"):
        with pytest.raises(ForesayError):
            ContinuationConfig.parse(bad)
    assert PredGenSettings(continuation="specbound:4:2").engine_config().continuation.width == 4
    with pytest.raises(ConfigError, match="continuation"):
        PredGenSettings(continuation="specbound:-1")
    assert continuation_spec("ar") == "plain" and continuation_spec("specbound:6:2") == "specbound:6:2"
    assert apply_continuation(["baseline", "greedy", "topk:3+jacobi", "jacobi"], "specbound") == \
        ["baseline", "greedy+specbound", "topk:3+jacobi", "jacobi"]
    with pytest.raises(ForesayError, match="ar, jacobi, specbound"):
        continuation_spec("medusa")


def test_heads_trainer_writes_heads_the_model_loads(tmp_path, tiny_lm):
    """The feature-caching trainer end to end, in miniature (the shipped heads: its card)."""
    from foresay.engine.demo.train_specbound import HeadsTrainConfig, run_training

    config = HeadsTrainConfig(dialogues=3, val_dialogues=2, exit_layers=(1,), rank=4, epochs=2,
                              max_reply=12, batch_size=16)
    out = tmp_path / "heads.safetensors"
    card = run_training(config, "tiny-random", out, progress=lambda *_: None)
    assert card["train"]["positions"] > 0 and card["val"]["positions"] > 0
    heads = load_exit_heads(tiny_lm, out)
    assert heads.exit_layers == (1,) and heads.temperatures == pytest.approx(card["annealed_temperatures"], abs=1e-3)
    with pytest.raises(ForesayError, match="exit layers"):  # tiny-random has 2 layers: no exit after 2
        run_training(HeadsTrainConfig(dialogues=1, val_dialogues=1, exit_layers=(2,)), "tiny-random", out)


def test_bench_refuses_a_continuation_it_cannot_run(load_fixture_lm):
    from foresay.app.cli import main

    load_fixture_lm("tiny-random")  # the fixture folder, built once
    assert main(["bench", "predgen", "--model", "tiny-random", "--continuation", "medusa"]) == 2
    # tiny-random ships no exit heads: the first turn says so
    assert main(["bench", "predgen", "--model", "tiny-random", "--limit", "1", "--threads", "1",
                 "--methods", "greedy", "--continuation", "specbound"]) == 2
