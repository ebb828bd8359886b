"""Speculative Streaming's model side (Bhendawade et al., 2024): stream embeddings and the
multi-stream forward pass.

A model fine-tuned for Speculative Streaming is an ordinary decoder plus `streams` learned
vectors (gamma of them, `hidden_size` floats each). In its top `layers` decoder layers, each
position t of the main stream carries gamma speculative streams: stream j (1..gamma) starts as
the main stream's hidden state at t entering those layers plus embedding j, sits at rotary
position t + j, attends to the main stream up to t and to streams 1..j at t, and predicts token
t + 1 + j (the main stream at t predicts t + 1). The main stream never attends to the streams,
so its output is the model's plain forward pass: the ordinary model runs without the streams.

The pass runs the model's own decoder layers one by one (Llama/Qwen2-style layout): the main
stream exactly as the model's forward would (same masks, same cache updates), then in each top
layer the stream rows against the main stream's keys and values, through a stand-in cache that
hands attention the cached keys plus the streams' own and stores nothing. The conversation's
cache therefore only ever receives main-stream positions.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from foresay.engine.errors import ForesayError

STREAMS_CONFIG = "streams.json"
STREAMS_WEIGHTS = "streams.safetensors"


@dataclass(frozen=True)
class StreamsSpec:
    """streams: gamma, speculative streams per position (the draft length they propose).
    layers: top decoder layers that carry the streams (multi-stream attention)."""
    streams: int = 3
    layers: int = 2

    def __post_init__(self):
        if not 1 <= self.streams <= 16:
            raise ForesayError("speculative streams: streams must lie in 1..16")
        if self.layers < 1:
            raise ForesayError("speculative streams: layers must be >= 1")


class StreamHeads(torch.nn.Module):
    """The stream identifier embeddings: the only parameters Speculative Streaming adds."""

    def __init__(self, spec: StreamsSpec, hidden_size: int):
        super().__init__()
        self.spec = spec
        self.embeddings = torch.nn.Parameter(torch.zeros(spec.streams, hidden_size))

    @classmethod
    def random(cls, spec: StreamsSpec, hidden_size: int, std: float = 0.5, seed: int = 0) -> "StreamHeads":
        heads = cls(spec, hidden_size)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            heads.embeddings.copy_(torch.randn(spec.streams, hidden_size, generator=generator) * std)
        return heads

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STREAMS_CONFIG).write_text(json.dumps(asdict(self.spec), indent=2) + "\n")
        save_file({"embeddings": self.embeddings.detach().float().contiguous()}, str(folder / STREAMS_WEIGHTS))

    @classmethod
    def load(cls, folder: Path) -> "StreamHeads":
        from safetensors.torch import load_file
        try:
            spec = StreamsSpec(**json.loads((folder / STREAMS_CONFIG).read_text()))
            embeddings = load_file(str(folder / STREAMS_WEIGHTS))["embeddings"]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ForesayError(f"the stream parameters in {folder} cannot be read: {exc}") from None
        if embeddings.shape[0] != spec.streams:
            raise ForesayError(f"{folder / STREAMS_WEIGHTS}: {embeddings.shape[0]} embeddings, "
                               f"{STREAMS_CONFIG} says {spec.streams}")
        heads = cls(spec, embeddings.shape[1])
        with torch.no_grad():
            heads.embeddings.copy_(embeddings)
        return heads


def check_model(model, spec: StreamsSpec) -> None:
    """The layer-wise pass needs a Llama/Qwen2-style decoder with full attention everywhere."""
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not all(hasattr(inner, name) for name in needed) or not hasattr(model, "lm_head"):
        raise ForesayError(f"speculative streams: {type(model).__name__} is not a Llama/Qwen2-style decoder")
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ForesayError("speculative streams: models with sliding-window layers are not supported")
    if spec.layers > model.config.num_hidden_layers:
        raise ForesayError(f"speculative streams: {spec.layers} stream layers, the model has "
                           f"{model.config.num_hidden_layers}")


class _StreamView:
    """Stands in for the cache in a stream row's attention: returns the layer's cached keys and
    values (the main stream's, just written) followed by the streams' own, and stores nothing."""

    def __init__(self, cache):
        self.cache = cache

    def update(self, keys, values, layer_idx, *args, **kwargs):
        layer = self.cache.layers[layer_idx]
        return torch.cat([layer.keys, keys], dim=-2), torch.cat([layer.values, values], dim=-2)


def stream_mask(n: int, past: int, streams: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive mask (1, 1, n * streams, past + n + n * streams) of the stream rows (row t * streams
    + j - 1 is stream j at main position t) over [cached, main stream, streams] keys."""
    t = torch.arange(n, device=device)
    rows_t = t[:, None].expand(n, streams).reshape(-1)
    rows_j = torch.arange(streams, device=device)[None, :].expand(n, streams).reshape(-1)
    see_main = t[None, :] <= rows_t[:, None]
    see_streams = (rows_t[:, None] == rows_t[None, :]) & (rows_j[None, :] <= rows_j[:, None])
    allowed = torch.cat([torch.ones(n * streams, past, dtype=torch.bool, device=device), see_main, see_streams], 1)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def multi_stream_forward(model, heads: StreamHeads, cache, ids: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Append `ids` (batch, n) to `cache` (a transformers Cache, main stream only) and return the
    final hidden states, normed: main (batch, n, hidden), streams (batch, n, streams, hidden).
    Apply `model.lm_head` to what is needed."""
    from transformers.masking_utils import create_causal_mask

    inner = model.model
    batch, n = ids.shape
    gamma, top = heads.spec.streams, model.config.num_hidden_layers - heads.spec.layers
    past = cache.get_seq_length()
    hidden = inner.embed_tokens(ids)
    positions = (torch.arange(n, device=ids.device) + past)[None].expand(batch, -1)
    main_mask = create_causal_mask(config=model.config, inputs_embeds=hidden, attention_mask=None,
                                   past_key_values=cache, position_ids=positions)
    rope = inner.rotary_emb(hidden, positions)
    stream_positions = (positions[:, :, None] + torch.arange(1, gamma + 1, device=ids.device)).reshape(batch, -1)
    stream_rope = inner.rotary_emb(hidden, stream_positions)
    mask = stream_mask(n, past, gamma, hidden.dtype, hidden.device)
    view = _StreamView(cache)
    streams = None
    for index, layer in enumerate(inner.layers[:model.config.num_hidden_layers]):
        if index == top:
            streams = (hidden[:, :, None, :] + heads.embeddings.to(hidden.dtype)).reshape(batch, n * gamma, -1)
        hidden = layer(hidden, attention_mask=main_mask, position_ids=positions, past_key_values=cache,
                       use_cache=True, position_embeddings=rope)
        if streams is not None:
            streams = layer(streams, attention_mask=mask, position_ids=stream_positions, past_key_values=view,
                            use_cache=True, position_embeddings=stream_rope)
    return inner.norm(hidden), inner.norm(streams).reshape(batch, n, gamma, -1)
