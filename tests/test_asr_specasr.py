"""SpecASR is lossless: token-identical to the reference greedy loop, whatever the draft."""
import copy
import types

import pytest
import torch
from transformers import WhisperForConditionalGeneration

from asr_support import noise_audio
from foresay.engine.asr.cursor import DecoderCursor
from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.greedy import greedy_decode
from foresay.engine.asr.specasr import SpecConfig, speculative_decode

TOKENS = 24
CONFIGS = [
    SpecConfig(),  # the paper's adaptive chain: threshold 0.4, at most 24
    SpecConfig(threshold=0.0, max_draft=5, recycle=False),  # fixed-length chain
    SpecConfig(threshold=0.9, max_draft=3, tree_budget=2, branch_length=1),
    SpecConfig(threshold=0.2, tree_budget=5, branch_length=3),
]


def independent_model(target, seed=99):
    torch.manual_seed(seed)
    return WhisperForConditionalGeneration(copy.deepcopy(target.config)).eval()


def adversarial_model(target):
    """Shares the target's network but ranks its tokens backwards: its top-1 is never the target's."""
    return types.SimpleNamespace(model=target.model, config=target.config, dtype=target.dtype,
                                 device=target.device, proj_out=lambda hidden: -target.proj_out(hidden))


def eot_biased(model, bias=31.0):
    """The same network with end-of-text pushed up, so that it ends after a few tokens on some
    inputs and runs on for others (a random fixture never ends on its own)."""
    offset = torch.zeros(model.config.vocab_size)
    offset[50256] = bias
    return types.SimpleNamespace(model=model.model, config=model.config, dtype=model.dtype,
                                 device=model.device, proj_out=lambda hidden: model.proj_out(hidden) + offset)


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def setup(request, whisper_models):
    target = whisper_models("tiny-random", request.param)
    draft = whisper_models("tiny-random-draft", request.param)
    independent = independent_model(target.model)
    independent.config._attn_implementation = request.param
    return target, {"self": target.model, "perturbed": draft.model, "independent": independent,
                    "adversarial": adversarial_model(target.model)}


def run(target, draft_model, seed, config, prefix=None, recycled=(), tokens=TOKENS):
    audio = noise_audio(seed)
    encoder_out = target.encode(audio)
    with torch.inference_mode():
        draft_out = draft_model.model.encoder(target.features(audio)).last_hidden_state
    prefix = prefix or target.vocab.decoder_prefix()
    reference = greedy_decode(target.model, encoder_out, prefix, target.rules, target.vocab.eot, tokens)
    result = speculative_decode(target.model, draft_model, encoder_out, draft_out, prefix, target.rules,
                                target.vocab.eot, config, tokens, recycled=recycled)
    return reference, result


@pytest.mark.parametrize("draft", ["self", "perturbed", "independent", "adversarial"])
def test_identical_to_greedy_for_every_draft_and_config(setup, draft):
    target, drafts = setup
    stats = []
    for seed, config in enumerate(CONFIGS):
        reference, result = run(target, drafts[draft], seed, config)
        assert result.tokens == reference.tokens, (draft, seed, config)
        assert result.ended == reference.ended
        stats.append(result.stats)
    accepted = sum(sum(s.accepted_per_round) for s in stats)
    drafted = sum(sum(s.tree_sizes) for s in stats)
    passes = sum(s.target_passes for s in stats)
    if draft == "self":  # every chain token is accepted; rejections only hit second-best branches
        assert passes < len(stats) * TOKENS / 2
        assert all(s.accepted_per_round == s.draft_lengths for s in stats)
    elif draft == "perturbed":
        assert accepted > 0.5 * sum(sum(s.draft_lengths) for s in stats)
    elif draft == "independent":
        assert accepted < 0.2 * drafted
    else:
        assert accepted == 0 and passes == len(stats) * TOKENS


def test_adaptive_drafting_stops_at_uncertain_tokens(setup):
    target, drafts = setup
    _, adaptive = run(target, drafts["perturbed"], 0, SpecConfig())
    _, eager = run(target, drafts["perturbed"], 0, SpecConfig(threshold=1.0))
    _, fixed = run(target, drafts["perturbed"], 0, SpecConfig(threshold=0.0, max_draft=6, recycle=False))
    assert max(adaptive.stats.draft_lengths) <= 24
    assert set(eager.stats.draft_lengths) <= {0, 1}  # every token is below probability 1 (0: no room left)
    assert set(fixed.stats.draft_lengths[:-1]) == {6}
    assert adaptive.stats.target_passes < TOKENS


@pytest.mark.parametrize("draft", ["independent", "adversarial"])
def test_a_draft_that_keeps_missing_is_paused_and_costs_a_few_probes(setup, draft):
    target, drafts = setup
    reference, paused = run(target, drafts[draft], 1, SpecConfig(), tokens=48)
    _, always = run(target, drafts[draft], 1, SpecConfig(backoff_after=0), tokens=48)
    assert paused.tokens == always.tokens == reference.tokens
    assert always.stats.draft_passes >= 40  # a pass per token, nearly all wasted
    assert paused.stats.draft_passes <= 16  # 2 missed chains, then one-token probes after pauses of 1, 2, 4, 8, 16
    assert paused.stats.target_passes == always.stats.target_passes


def test_the_backoff_pauses_double_and_an_accepted_token_ends_them():
    from foresay.engine.asr.specasr import MAX_PAUSE, _Backoff

    def schedule(backoff, hits):  # ".": no draft, "x"/"+": a full chain missed/held, "1": a one-token probe
        drafted = []
        for hit in hits:
            while not (room := backoff.room(24)):
                drafted.append(".")
            drafted.append("1" if room == 1 else "+" if hit else "x")
            backoff.record(hit)
        return "".join(drafted)

    assert schedule(_Backoff(2), [False] * 5 + [True, False, False, True]) == "xx.1..1....1........1xx.1"
    backoff = _Backoff(2)
    schedule(backoff, [False] * 12)
    assert backoff.pause == MAX_PAUSE
    assert schedule(_Backoff(0), [False] * 6) == "xxxxxx"


def test_trees_save_target_passes_over_chains(setup):
    target, drafts = setup
    chain = tree = 0
    for seed in range(3):
        chain += run(target, drafts["perturbed"], seed, SpecConfig())[1].stats.target_passes
        result = run(target, drafts["perturbed"], seed, SpecConfig(tree_budget=4))[1]
        tree += result.stats.target_passes
        assert any(size > length for size, length in zip(result.stats.tree_sizes, result.stats.draft_lengths))
    assert tree < chain


def test_recycled_guess_saves_draft_passes_and_a_wrong_one_is_harmless(setup):
    target, drafts = setup
    reference, cold = run(target, drafts["self"], 4, SpecConfig(threshold=0.0, max_draft=12))
    _, warm = run(target, drafts["self"], 4, SpecConfig(threshold=0.0, max_draft=12), recycled=reference.tokens[:12])
    assert warm.tokens == reference.tokens and warm.stats.recycled >= 11
    assert warm.stats.draft_passes < cold.stats.draft_passes
    wrong = [t + 1 for t in reference.tokens[:12]]
    _, spoiled = run(target, drafts["self"], 4, SpecConfig(threshold=0.0, max_draft=12), recycled=wrong)
    assert spoiled.tokens == reference.tokens and spoiled.stats.recycled == 0


def test_forced_prefix_with_prompt(setup):
    target, drafts = setup
    prompt = target.tokenizer.encode(" we spoke of rain", add_special_tokens=False).ids
    prefix = target.vocab.decoder_prefix(prompt=prompt, forced=[18435, 995])
    for draft in ("perturbed", "adversarial"):
        reference, result = run(target, drafts[draft], 5, SpecConfig(tree_budget=3), prefix=prefix, tokens=15)
        assert result.tokens == reference.tokens


def test_tree_pass_equals_sequential_scoring(whisper_models):
    """The ancestor-only mask and depth positions give every node the logits of its own path."""
    target = whisper_models("tiny-random", "eager")
    encoder_out = target.encode(noise_audio(6))
    prefix = target.vocab.decoder_prefix()
    cursor = DecoderCursor(target.model, encoder_out)
    cursor.extend(prefix[:-1])
    tokens = [prefix[-1], 100, 200, 300, 400, 500]
    parents = [-1, 0, 1, 0, 3, 1]  # paths: 100-200, 300-400, 100-500
    tree_logits, positions = cursor.tree(tokens, parents, [len(prefix) - 1] * len(tokens))
    assert positions.tolist() == [1, 2, 3, 2, 3, 3]
    cursor.keep_path([0, 3, 4])
    assert cursor.cached == [*prefix, 300, 400]
    for node, path in [(2, [100, 200]), (4, [300, 400]), (5, [100, 500])]:
        fresh = DecoderCursor(target.model, encoder_out).extend([*prefix, *path])[-1]
        torch.testing.assert_close(tree_logits[node], fresh, atol=1e-4, rtol=1e-4)
    kept = cursor.extend([600])[-1]
    torch.testing.assert_close(kept, DecoderCursor(target.model, encoder_out).extend([*prefix, 300, 400, 600])[-1],
                               atol=1e-4, rtol=1e-4)


def test_config_is_validated():
    for bad in [dict(threshold=1.5), dict(max_draft=0), dict(tree_budget=-1), dict(branch_length=0),
                dict(backoff_after=-1)]:
        with pytest.raises(InvalidAsrConfig):
            SpecConfig(**bad)


def test_the_end_of_the_context_is_respected(setup):
    target, drafts = setup
    prefix = target.vocab.decoder_prefix(forced=[18435] * 438)  # 440 of 448 positions taken
    for config in (SpecConfig(tree_budget=4, branch_length=4), SpecConfig(threshold=0.0, max_draft=24)):
        reference, result = run(target, drafts["self"], 7, config, prefix=prefix, tokens=100)
        assert result.tokens == reference.tokens and len(result.tokens) == 8


def test_end_of_text_is_reached_identically(setup):
    target, drafts = setup
    ending = eot_biased(target.model)
    candidates = {"self": ending, "perturbed": eot_biased(drafts["perturbed"]), "adversarial": adversarial_model(ending)}
    ended = 0
    for seed in range(3):
        audio = noise_audio(seed)
        encoder_out = target.encode(audio)
        reference = greedy_decode(ending, encoder_out, target.vocab.decoder_prefix(), target.rules, target.vocab.eot, 30)
        ended += reference.ended
        for name, draft in candidates.items():
            with torch.inference_mode():
                draft_out = draft.model.encoder(target.features(audio)).last_hidden_state
            for config in (SpecConfig(), SpecConfig(threshold=0.0, max_draft=8, tree_budget=3, branch_length=3)):
                result = speculative_decode(ending, draft, encoder_out, draft_out, target.vocab.decoder_prefix(),
                                            target.rules, target.vocab.eot, config, 30)
                assert (result.tokens, result.ended) == (reference.tokens, reference.ended), (name, seed, config)
    assert ended >= 2  # the end-of-text paths (draft proposes it, target picks it) were exercised
