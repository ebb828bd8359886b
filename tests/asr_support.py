"""Shared ASR test fixtures: the tiny random Whisper pair, built once per test session.

conftest imports this module for every test session, so it imports nothing heavy itself."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def asr_fixture_root(tmp_path_factory):
    import torch  # here, not at module level: conftest imports this module for every test

    torch.set_num_threads(1)  # the build machines are small and shared
    return tmp_path_factory.mktemp("asr-fixtures")


@pytest.fixture(scope="session")
def whisper_models(asr_fixture_root):
    """load(name, attention) -> LoadedWhisper, each loaded once."""
    from foresay.engine.asr.whisper.models import WhisperModelConfig, load_whisper

    loaded = {}

    def load(name: str = "tiny-random", attention: str = "sdpa"):
        key = (name, attention)
        if key not in loaded:
            loaded[key] = load_whisper(WhisperModelConfig(name, attention=attention, fixture_root=asr_fixture_root))
        return loaded[key]

    return load


def noise_audio(seed: int, seconds: float = 2.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(16000 * seconds)) * 0.1).astype(np.float32)


def assert_cursors_agree(ref, got, tokens: list[int]) -> None:
    """Two decoder cursors over the same audio give the same logits (to float tolerance, the
    same argmax) for a chain past one 32-row pass, a crop back to 10 tokens, and a short chain."""
    import torch

    for a, b in ((ref.extend(tokens), got.extend(tokens)), (ref.sync(tokens[:10]), got.sync(tokens[:10])),
                 (ref.extend([7, 8, 9]), got.extend([7, 8, 9]))):
        if isinstance(a, torch.Tensor):
            assert torch.allclose(a, b, atol=1e-3, rtol=1e-4) and torch.equal(a.argmax(-1), b.argmax(-1))
        else:
            assert a == b
