"""Captured Whisper decoder passes (static buffers, fixed shapes): same tokens as the dynamic cursor."""
import copy

import pytest
import torch

from asr_support import assert_cursors_agree, noise_audio
from foresay.engine.asr.captured import StaticCursor, attach, make_cursor
from foresay.engine.asr.cursor import DecoderCursor
from foresay.engine.asr.greedy import greedy_decode
from foresay.engine.asr.specasr import SpecConfig, speculative_decode


@pytest.fixture
def pair(whisper_models):
    """Copies of the fixture pair with captured decoders (the shared models stay dynamic)."""
    target, draft = whisper_models("tiny-random"), whisper_models("tiny-random-draft")
    captured = [copy.copy(target), copy.copy(draft)]
    for loaded in captured:
        loaded.model = copy.deepcopy(loaded.model)
        attach(loaded.model)
    return (target, draft), captured


def test_make_cursor_picks_the_captured_decoder(pair):
    (target, _), (captured, _) = pair
    out = captured.encode(noise_audio(0))
    assert isinstance(make_cursor(captured.model, out), StaticCursor)
    assert torch.allclose(out, target.encode(noise_audio(0)), atol=1e-5)  # through the captured encoder
    assert type(make_cursor(target.model, target.encode(noise_audio(0)))) is DecoderCursor


def test_captured_passes_match_the_dynamic_cursor(pair):
    (target, _), (captured, _) = pair
    audio = noise_audio(1)
    prefix = target.vocab.decoder_prefix()
    ref = DecoderCursor(target.model, target.encode(audio))
    got = make_cursor(captured.model, captured.encode(audio))
    tokens = prefix + list(range(400, 440))  # longer than one 32-row pass: chunked
    assert_cursors_agree(ref, got, tokens)


def test_greedy_and_specasr_on_captured_decoders_equal_the_reference(pair, seed=1):
    (target, draft), (ctarget, cdraft) = pair
    audio = noise_audio(seed)
    prefix = target.vocab.decoder_prefix()
    eot, rules = target.vocab.eot, target.rules
    reference = greedy_decode(target.model, target.encode(audio), prefix, rules, eot, 40)
    assert greedy_decode(ctarget.model, ctarget.encode(audio), prefix, rules, eot, 40).tokens == reference.tokens
    # a tree of more than 32 nodes runs as chunked passes
    for config in (SpecConfig(), SpecConfig(threshold=0.2, tree_budget=8, branch_length=4)):
        result = speculative_decode(ctarget.model, cdraft.model, ctarget.encode(audio), cdraft.encode(audio),
                                    prefix, rules, eot, config, 40)
        assert result.tokens == reference.tokens, config
