"""SpecASR over an LLM-based recognizer (Qwen3-ASR architecture) is lossless: token-identical to
the target's own greedy loop, whatever the draft; the same algorithm code as for Whisper."""
import pytest
import torch

from asr_support import noise_audio
from llm_asr_support import adversarial, biased, independent, llm_asr_models  # noqa: F401
from foresay.engine.asr.greedy import greedy_loop
from foresay.engine.asr.specasr import SpecConfig, speculative_loop

TOKENS = 24
CONFIGS = [
    SpecConfig(),  # the paper's adaptive chain: threshold 0.4, at most 24
    SpecConfig(threshold=0.0, max_draft=5, recycle=False),  # fixed-length chain
    SpecConfig(threshold=0.9, max_draft=3, tree_budget=2, branch_length=1),
    SpecConfig(threshold=0.2, tree_budget=5, branch_length=3),
]


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def setup(request, llm_asr_models):
    target = llm_asr_models("tiny-random-qwen3-asr", request.param)
    draft = llm_asr_models("tiny-random-qwen3-asr-draft", request.param)
    other = independent(target)
    other.model.config._attn_implementation = request.param
    return target, {"self": target, "perturbed": draft, "independent": other, "adversarial": adversarial(target)}


def run(target, draft, seed, config, forced=(), prompt=(), recycled=(), tokens=TOKENS):
    audio = noise_audio(seed)
    prefix = target.layout.decoder_prefix(forced)
    reference = greedy_loop(target.cursor(target.encode(audio), prompt), prefix, target.rules, target.layout.end, tokens)
    result = speculative_loop(target.cursor(target.encode(audio), prompt),
                              draft.cursor(draft.encode(audio), prompt, draft=True),
                              prefix, target.rules, target.layout.end, config, tokens, recycled=recycled)
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
    passes = sum(s.target_passes for s in stats)  # each counts the prefill pass too
    if draft == "self":  # every chain token is accepted; rejections only hit second-best branches
        assert passes < len(stats) * (TOKENS / 2 + 1)
        assert all(s.accepted_per_round == s.draft_lengths for s in stats)
    elif draft == "perturbed":
        assert accepted > 0.5 * sum(sum(s.draft_lengths) for s in stats)
    elif draft == "independent":
        assert accepted < 0.2 * drafted
    else:
        assert accepted == 0 and passes == len(stats) * (TOKENS + 1)


def test_adaptive_drafting_trees_and_recycling_cut_passes(setup):
    target, drafts = setup
    _, adaptive = run(target, drafts["perturbed"], 0, SpecConfig())
    _, eager = run(target, drafts["perturbed"], 0, SpecConfig(threshold=1.0))
    assert max(adaptive.stats.draft_lengths) <= 24 and adaptive.stats.target_passes < TOKENS
    assert set(eager.stats.draft_lengths) <= {0, 1}
    chain = tree = 0
    for seed in range(3):
        chain += run(target, drafts["perturbed"], seed, SpecConfig())[1].stats.target_passes
        result = run(target, drafts["perturbed"], seed, SpecConfig(tree_budget=4))[1]
        tree += result.stats.target_passes
        assert any(size > length for size, length in zip(result.stats.tree_sizes, result.stats.draft_lengths))
    assert tree < chain
    fixed = SpecConfig(threshold=0.0, max_draft=12)
    reference, cold = run(target, drafts["self"], 4, fixed)
    _, warm = run(target, drafts["self"], 4, fixed, recycled=reference.tokens[:12])
    assert warm.tokens == reference.tokens and warm.stats.recycled >= 11
    assert warm.stats.draft_passes < cold.stats.draft_passes
    _, spoiled = run(target, drafts["self"], 4, fixed, recycled=[(t + 1) % 400 for t in reference.tokens[:12]])
    assert spoiled.tokens == reference.tokens and spoiled.stats.recycled == 0


def test_forced_words_and_context_prompt(setup):
    target, drafts = setup
    prompt = target.tokenizer.encode(" we spoke of rain in Paris", add_special_tokens=False).ids
    forced = target.tokenizer.encode("Hello there", add_special_tokens=False).ids
    for name in ("perturbed", "adversarial", "independent"):
        reference, result = run(target, drafts[name], 5, SpecConfig(tree_budget=3), forced=forced, prompt=prompt,
                                tokens=15)
        assert result.tokens == reference.tokens
    plain, _ = run(target, drafts["self"], 5, SpecConfig(), tokens=15)
    assert reference.tokens != plain.tokens  # the forced words and the prompt were heard


def test_end_of_transcript_is_reached_identically_by_either_end_token(llm_asr_models):
    target = llm_asr_models("tiny-random-qwen3-asr")
    drafts = {"perturbed": llm_asr_models("tiny-random-qwen3-asr-draft")}
    # <|im_end|>, and <|endoftext|> (folded into it), each pushed up just enough to end some decodes
    for end, bias in ((target.layout.end, 12.0), (target.layout.first_special, 22.0)):
        ended = 0
        ending = biased(target, end, bias)
        candidates = {"self": ending, "perturbed": biased(drafts["perturbed"], end, bias),
                      "adversarial": adversarial(ending)}
        for seed in range(3):
            audio = noise_audio(seed)
            prefix = target.layout.decoder_prefix()
            reference = greedy_loop(ending.cursor(ending.encode(audio)), prefix, target.rules, target.layout.end, 30)
            ended += reference.ended
            for name, draft in candidates.items():
                for config in (SpecConfig(threshold=0.0, max_draft=8, tree_budget=3, branch_length=3),):
                    result = speculative_loop(ending.cursor(ending.encode(audio)), draft.cursor(draft.encode(audio)),
                                              prefix, target.rules, target.layout.end, config, 30)
                    assert (result.tokens, result.ended) == (reference.tokens, reference.ended), (name, seed, config)
        assert 1 <= ended < 3  # some decodes end early, some run to the budget


def test_tree_pass_over_the_prefilled_context_equals_sequential_scoring(llm_asr_models):
    """The ancestor-only mask, the context columns and depth positions give every node the
    logits of its own path."""
    target = llm_asr_models("tiny-random-qwen3-asr", "eager")
    embeds = target.encode(noise_audio(6))
    prefix = target.layout.decoder_prefix()
    cursor = target.cursor(embeds)
    assert cursor.context_length > embeds.shape[0]
    tokens = [prefix[-1], 100, 200, 300, 400, 450]
    parents = [-1, 0, 1, 0, 3, 1]  # paths: 100-200, 300-400, 100-450
    tree_logits, positions = cursor.tree(tokens, parents, [0] * len(tokens))
    assert positions.tolist() == [0, 1, 2, 1, 2, 2]
    cursor.keep_path([0, 3, 4])
    assert cursor.cached == [*prefix, 300, 400]
    for node, path in [(2, [100, 200]), (4, [300, 400]), (5, [100, 450])]:
        fresh = target.cursor(embeds).extend([*prefix, *path])[-1]
        torch.testing.assert_close(tree_logits[node], fresh, atol=1e-4, rtol=1e-4)
    kept = cursor.extend([50])[-1]
    torch.testing.assert_close(kept, target.cursor(embeds).extend([*prefix, 300, 400, 50])[-1], atol=1e-4, rtol=1e-4)
