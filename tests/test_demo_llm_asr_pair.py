"""The shipped demo LLM-ASR pair (demo-llm verified, demo-llm-draft drafting): SpecASR gives the
target's own greedy transcript, token for token, on held-out clips (voices never heard in
training), with fewer target passes."""
import pytest

from foresay.engine.asr.specasr import SpecConfig


@pytest.fixture(scope="module")
def pair():
    from foresay.engine.asr.pairs import load_pair
    from foresay.engine.demo.models import DEMO_LLM_ASR, demo_models_root

    if not (demo_models_root() / DEMO_LLM_ASR["demo-llm"] / "config.json").exists():
        pytest.skip("this install comes without the demo LLM-ASR pair")
    return load_pair("demo-llm", "demo-llm-draft")


def test_specasr_on_the_shipped_pair_equals_its_greedy_on_held_out_clips(pair):
    import torch

    from foresay.engine.demo.speech import speech_set

    torch.set_num_threads(1)
    clips = speech_set("test", 4, seed=0).audio
    greedy_passes = {"adaptive": 0, "tree": 0}
    spec_passes = dict.fromkeys(greedy_passes, 0)
    for clip in clips:
        reference = pair.decode(clip, None, 96)
        assert reference.ended and len(reference.tokens) > 3  # a whole transcript, not the length limit
        for label, spec in (("adaptive", SpecConfig()), ("tree", SpecConfig(tree_budget=4))):
            result = pair.decode(clip, spec, 96)
            assert (result.tokens, result.ended) == (reference.tokens, reference.ended)
            greedy_passes[label] += reference.stats.target_passes
            spec_passes[label] += result.stats.target_passes
    assert all(spec_passes[k] < greedy_passes[k] for k in greedy_passes)


def test_the_pair_computes_features_once_and_each_model_hears_what_it_would_alone(pair):
    import torch

    from foresay.engine.asr.llm.models import encode_both
    from foresay.engine.demo.speech import speech_set

    clip = speech_set("test", 4, seed=0).audio[0]
    target, draft = encode_both(pair.target, pair.draft, clip)
    assert torch.equal(target, pair.target.encode(clip)) and torch.equal(draft, pair.draft.encode(clip))
