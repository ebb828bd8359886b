"""Zonos's transformer decode step at static shapes (engine/tts/zonos_captured.py): frame by frame
through the owned buffers it computes what attention over just the filled positions computes,
and generation through it gives Zonos's own codes. Off CUDA the step runs eagerly, the very
function a GPU captures."""
from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from foresay.engine.tts.zonos_captured import CapturedZonosStep, is_transformer_backbone, rotary_table, rotate

CODEBOOKS, WIDTH, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 9, 32, 4, 2, 8, 2


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_heads, self.num_heads_kv, self.head_dim = HEADS, KV_HEADS, HEAD_DIM
        self.in_proj = nn.Linear(WIDTH, (HEADS + 2 * KV_HEADS) * HEAD_DIM, bias=False)
        self.out_proj = nn.Linear(HEADS * HEAD_DIM, WIDTH, bias=False)


class GatedMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, 2 * 48, bias=False)
        self.fc2 = nn.Linear(48, WIDTH, bias=False)

    def forward(self, x):
        y, gate = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(y * F.silu(gate))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.mixer, self.norm2, self.mlp = nn.LayerNorm(WIDTH), Mixer(), nn.LayerNorm(WIDTH), GatedMlp()


class TinyZonos(nn.Module):
    """Zonos's transformer layout at toy width, with its own cache and step recorded when used."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.autoencoder = types.SimpleNamespace(num_codebooks=CODEBOOKS)
        self.embeddings = nn.ModuleList(nn.Embedding(1026, WIDTH) for _ in range(CODEBOOKS))
        self.heads = nn.ModuleList(nn.Linear(WIDTH, 1025, bias=False) for _ in range(CODEBOOKS))
        self.backbone = nn.Module()
        self.backbone.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.backbone.norm_f = nn.LayerNorm(WIDTH)
        self.own_calls: list[str] = []

    @property
    def device(self):
        return next(self.parameters()).device

    def embed_codes(self, codes):
        return sum(embedding(codes[:, i]) for i, embedding in enumerate(self.embeddings))

    def apply_heads(self, hidden):
        return torch.stack([head(hidden) for head in self.heads], dim=1)

    def setup_cache(self, batch_size, max_seqlen, dtype=torch.bfloat16):
        self.own_calls.append("setup_cache")
        return "zonos's own cache"

    def _decode_one_token(self, input_ids, inference_params, cfg_scale, allow_cudagraphs=True):
        self.own_calls.append("decode")
        return "zonos's own step"

    def can_use_cudagraphs(self):
        return False

    def guided_logits_of_sequence(self, frames: torch.Tensor, cfg_scale: float) -> torch.Tensor:
        """The reference: every position of `frames` (1, codebooks, n) in one causal pass, no cache."""
        n = frames.shape[-1]
        hidden = self.embed_codes(frames.transpose(1, 2).reshape(n, CODEBOOKS, 1)).view(1, n, WIDTH).repeat(2, 1, 1)
        table = rotary_table(n, HEAD_DIM).unsqueeze(0).expand(2, -1, -1, -1)
        for layer in self.backbone.layers:
            q, k, v = layer.mixer.in_proj(layer.norm(hidden)).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM,
                                                                      KV_HEADS * HEAD_DIM], dim=-1)
            q = rotate(q.view(2, n, HEADS, HEAD_DIM), table).transpose(1, 2)
            k = rotate(k.view(2, n, KV_HEADS, HEAD_DIM), table).transpose(1, 2)
            v = v.view(2, n, KV_HEADS, HEAD_DIM).transpose(1, 2)
            mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            hidden = hidden + layer.mixer.out_proj(mixed.transpose(1, 2).reshape(2, n, HEADS * HEAD_DIM))
            hidden = hidden + layer.mlp(layer.norm2(hidden))
        logits = self.apply_heads(self.backbone.norm_f(hidden)).float()  # (2, codebooks, n, 1025)
        conditioned, unconditioned = logits.chunk(2)
        return (unconditioned + (conditioned - unconditioned) * cfg_scale)[0].transpose(0, 1)  # (n, codebooks, 1025)


@dataclass
class InferenceParams:  # the fields of zonos.config.InferenceParams
    max_seqlen: int
    max_batch_size: int
    seqlen_offset: int = 0
    batch_size_offset: int = 0
    key_value_memory_dict: dict = field(default_factory=dict)
    lengths_per_sample: torch.Tensor | None = None


@pytest.fixture
def zonos_config_module(monkeypatch):
    """zonos.config where Zonos is not installed (the step builds Zonos's InferenceParams)."""
    if importlib.util.find_spec("zonos") is None:
        package, config = types.ModuleType("zonos"), types.ModuleType("zonos.config")
        config.InferenceParams = InferenceParams
        package.config = config
        monkeypatch.setitem(sys.modules, "zonos", package)
        monkeypatch.setitem(sys.modules, "zonos.config", config)


def decode_frame_by_frame(model: TinyZonos, frames: torch.Tensor, max_seqlen: int, cfg_scale):
    """Zonos's generation loop, reduced: a cache for `max_seqlen` positions, then the step of each
    of `frames` (1, codebooks, n) in turn; the cache's parameters and each step's logits."""
    params = model.setup_cache(batch_size=2, max_seqlen=max_seqlen, dtype=torch.float32)
    steps = []
    for position in range(frames.shape[-1]):
        params.seqlen_offset = position
        steps.append(model._decode_one_token(frames[..., position:position + 1], params, cfg_scale).clone())
    return params, steps


@torch.inference_mode()
def test_frame_by_frame_the_static_step_computes_attention_over_just_the_filled_positions(zonos_config_module):
    model = TinyZonos().eval()
    step = CapturedZonosStep(model, capture=False).install()
    frames = torch.randint(0, 1024, (1, CODEBOOKS, 12))
    reference = model.guided_logits_of_sequence(frames, cfg_scale=2.0)

    params, steps = decode_frame_by_frame(model, frames, 12, torch.tensor(2.0))
    assert params.key_value_memory_dict is step.buffers and step.capacity >= 12
    for logits, expected in zip(steps, reference, strict=True):
        assert logits.shape == (1, CODEBOOKS, 1025)
        torch.testing.assert_close(logits[0], expected, rtol=1e-4, atol=1e-4)
    assert step.passes_built == 1 and model.own_calls == []


@torch.inference_mode()
def test_a_later_generation_reuses_the_buffers_and_a_longer_one_grows_them(zonos_config_module):
    model = TinyZonos().eval()
    step = CapturedZonosStep(model, capture=False).install()
    frames = torch.randint(0, 1024, (1, CODEBOOKS, 6))
    reference = model.guided_logits_of_sequence(frames, cfg_scale=3.0)

    def generate(frames: torch.Tensor, max_seqlen: int) -> list[torch.Tensor]:
        return [logits[0] for logits in decode_frame_by_frame(model, frames, max_seqlen, 3.0)[1]]

    generate(torch.randint(0, 1024, (1, CODEBOOKS, 9)), 40)  # leaves keys beyond the next one's end
    buffers = step.buffers[0][0]
    later = generate(frames, 40)
    longer = generate(frames, step.capacity + 1)
    assert step.buffers[0][0] is not buffers and step.capacity > buffers.shape[1] and step.passes_built == 2
    for logits in (later, longer):
        for position, expected in enumerate(reference):
            torch.testing.assert_close(logits[position], expected, rtol=1e-4, atol=1e-4)


def test_what_the_step_does_not_own_goes_to_zonos_own_path(zonos_config_module):
    model = TinyZonos().eval()
    assert is_transformer_backbone(model) and not model.can_use_cudagraphs()
    CapturedZonosStep(model, capture=False).install()
    assert model.can_use_cudagraphs()  # so Zonos does not compile, and the engine does not interleave
    assert model.setup_cache(batch_size=4, max_seqlen=10) == "zonos's own cache"  # a batch of segments
    foreign = InferenceParams(10, 2, key_value_memory_dict={0: (torch.zeros(1), None)})
    assert model._decode_one_token(torch.zeros(1, CODEBOOKS, 1, dtype=torch.long), foreign, 2.0) == "zonos's own step"
    assert model.own_calls == ["setup_cache", "decode"]
    with pytest.raises(ValueError, match="transformer backbone"):
        CapturedZonosStep(types.SimpleNamespace(backbone=types.SimpleNamespace(layers=[object()])))


@pytest.mark.skipif(importlib.util.find_spec("zonos") is None, reason="Zonos is not installed")
def test_generation_through_the_static_step_gives_zonos_own_codes(tmp_path):
    """Real Zonos (toy width, random weights, bfloat16 on the CPU): the same seed gives the same
    codes, and every step's logits agree with Zonos's own step within bfloat16's rounding."""
    from foresay.app.bench.zonos_random import offline_zonos, random_zonos_folder

    folder = random_zonos_folder(tmp_path / "zonos", small=True)
    with offline_zonos(small=True):
        from zonos.conditioning import make_cond_dict
        from zonos.model import Zonos

        model = Zonos.from_local(str(folder / "config.json"), str(folder / "model.safetensors"), device="cpu")
        model.requires_grad_(False).eval()
        prefix = model.prepare_conditioning(make_cond_dict(
            text="Hello there, how are you today?", language="en-us",
            unconditional_keys={"speaker", "vqscore_8", "dnsmos_ovrl"}))

        def generate() -> tuple[torch.Tensor, list[torch.Tensor]]:
            steps, decode = [], model._decode_one_token

            def recorded(*args, **kwargs):
                steps.append(decode(*args, **kwargs).clone())
                return steps[-1]

            model._decode_one_token = recorded
            torch.manual_seed(1)
            codes = model.generate(prefix, max_new_tokens=40, progress_bar=False, disable_torch_compile=True)
            model._decode_one_token = decode
            return codes, steps

        own_codes, own_steps = generate()
        step = CapturedZonosStep(model, capture=False).install()
        codes, steps = generate()
    assert step.passes_built == 1 and len(steps) == len(own_steps) == 48
    assert codes.equal(own_codes)
    for logits, own in zip(steps, own_steps):
        finite = own.isfinite()
        assert finite.equal(logits.isfinite())
        assert (logits[finite] - own[finite]).abs().max() <= 0.05  # a few bfloat16 steps at |logit| ~2
        assert logits.argmax(-1).equal(own.argmax(-1))
