"""Captured decoder passes of an LLM-based recognizer (static buffers, one pass shape): the same
tokens as the dynamic cursor, for greedy decoding and SpecASR, chains and trees, across windows."""
import copy
import dataclasses

import pytest

from asr_support import assert_cursors_agree, noise_audio
from llm_asr_support import adversarial, llm_asr_models  # noqa: F401
from foresay.engine.asr.captured import StaticCursor
from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.greedy import greedy_loop
from foresay.engine.asr.llm.captured import CapturedLlmDecoder, attach
from foresay.engine.asr.llm.cursor import LlmCursor
from foresay.engine.asr.specasr import SpecConfig, speculative_loop

TOKENS = 40  # past one 32-row pass: chains and trees run in chunks


@pytest.fixture(scope="module")
def pair(llm_asr_models):
    """The fixture pair, and a copy of the target with a captured decoder (the shared one stays dynamic)."""
    target = llm_asr_models("tiny-random-qwen3-asr", "sdpa")
    draft = llm_asr_models("tiny-random-qwen3-asr-draft", "sdpa")
    captured = dataclasses.replace(target, model=copy.deepcopy(target.model))
    attach(captured.model)
    return target, draft, captured


def test_the_target_decodes_through_the_captured_decoder_and_a_draft_does_not(pair):
    target, _, captured = pair
    embeds = captured.encode(noise_audio(0))
    assert isinstance(captured.cursor(embeds, [11, 12]), StaticCursor)
    assert isinstance(captured.cursor(embeds, draft=True), LlmCursor)
    assert isinstance(target.cursor(target.encode(noise_audio(0))), LlmCursor)


def test_captured_passes_match_the_dynamic_cursor(pair):
    target, _, captured = pair
    audio, prompt = noise_audio(1), [21, 22, 23]
    ref = target.cursor(target.encode(audio), prompt)
    got = captured.cursor(captured.encode(audio), prompt)
    tokens = target.layout.decoder_prefix(()) + list(range(300, 340))
    assert_cursors_agree(ref, got, tokens)


@pytest.mark.parametrize("seed", [1, 2])
def test_greedy_and_specasr_on_the_captured_decoder_equal_the_reference(pair, seed):
    """Windows of different lengths one after the other reuse the buffers: each context is
    prefilled afresh."""
    target, draft, captured = pair
    audio = noise_audio(seed)[: 16000 * (1 + seed)]
    prefix, end = target.layout.decoder_prefix(()), target.layout.end
    reference = greedy_loop(target.cursor(target.encode(audio)), prefix, target.rules, end, TOKENS)
    assert len(reference.tokens) > 32  # more than one pass's rows
    assert greedy_loop(captured.cursor(captured.encode(audio)), prefix, target.rules, end, TOKENS).tokens == \
        reference.tokens
    accepted = []
    for config, drafter in ((SpecConfig(), draft), (SpecConfig(threshold=0.2, tree_budget=8, branch_length=4), draft),
                            (SpecConfig(), adversarial(draft))):
        result = speculative_loop(captured.cursor(captured.encode(audio)),
                                  drafter.cursor(drafter.encode(audio), draft=True),
                                  prefix, target.rules, end, config, TOKENS)
        assert result.tokens == reference.tokens, config
        accepted.append(sum(result.stats.accepted_per_round))
    assert accepted[0] > 0 and accepted[1] > 0 and accepted[2] == 0  # drafts were taken, and refused


def test_a_context_too_long_for_the_buffers_keeps_the_dynamic_cursor(pair):
    target, _, _ = pair
    model = copy.deepcopy(target.model)
    decoder = CapturedLlmDecoder(model, context_positions=8)
    model.foresay_captured = decoder
    loaded = dataclasses.replace(target, model=model)
    embeds = loaded.encode(noise_audio(3))
    assert not decoder.fits(loaded.context(embeds))
    assert isinstance(loaded.cursor(embeds), LlmCursor)
    with pytest.raises(AsrError, match="context of"):
        decoder.load(loaded.context(embeds))
