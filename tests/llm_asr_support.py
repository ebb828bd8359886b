"""Shared fixtures of the LLM-based ASR tests: the tiny random Qwen3-ASR pair and stand-in drafts.

Test modules import `llm_asr_models` from here (pytest picks up imported fixtures)."""
from __future__ import annotations

import copy
import dataclasses
import types

import pytest


@pytest.fixture(scope="session")
def llm_asr_models(asr_fixture_root):
    """load(name, attention) -> LoadedLlmAsr, each loaded once."""
    from foresay.engine.asr.llm.models import LlmAsrModelConfig, load_llm_asr

    loaded = {}

    def load(name: str = "tiny-random-qwen3-asr", attention: str = "sdpa"):
        key = (name, attention)
        if key not in loaded:
            loaded[key] = load_llm_asr(LlmAsrModelConfig(name, attention=attention, fixture_root=asr_fixture_root))
        return loaded[key]

    return load


def independent(target, seed: int = 99):
    """A recognizer of the same architecture and vocabulary with weights of its own (encoder too)."""
    import torch
    from transformers import Qwen3ASRForConditionalGeneration

    torch.manual_seed(seed)
    model = Qwen3ASRForConditionalGeneration(copy.deepcopy(target.model.config)).eval()
    return dataclasses.replace(target, model=model)


def relogit(target, change):
    """The target's network with its output logits changed by `change(logits)`."""
    model = target.model
    stand_in = types.SimpleNamespace(model=model.model, config=model.config, dtype=model.dtype, device=model.device,
                                     lm_head=lambda hidden: change(model.lm_head(hidden)))
    return dataclasses.replace(target, model=stand_in)


def adversarial(target):
    """Ranks the target's tokens backwards: its top-1 is never the target's."""
    return relogit(target, lambda logits: -logits)


def biased(target, token: int, bias: float):
    """Pushes one token up, e.g. the end of the transcript, so that decodes end on some inputs."""
    def change(logits):
        out = logits.clone()
        out[..., token] += bias
        return out
    return relogit(target, change)
