"""Speculative Streaming's model side (Bhendawade et al., 2024): stream embeddings and the
multi-stream forward pass.

A model fine-tuned for Speculative Streaming is an ordinary decoder plus `streams` learned
vectors (gamma of them, `hidden_size` floats each). In its top `layers` decoder layers, each
position t of the main stream carries gamma speculative streams: stream j (1..gamma) starts as
the main stream's hidden state at t entering those layers plus embedding j, sits at rotary
position t + j, attends to the main stream up to t and to streams 1..j at t, and predicts token
t + 1 + j (the main stream at t predicts t + 1). The main stream never attends to the streams,
so its output is the model's plain forward pass: the ordinary model runs without the streams.
Optionally (`rank` > 0) the streams also get low-rank adapters on the top layers' linear maps,
applied to the stream rows only: then the base weights can stay frozen during training and the
main stream is exactly the base model (the paper's lossless mode).

The pass runs the model's own decoder layers one by one (Llama/Qwen2-style layout): the main
stream exactly as the model's forward would (same masks, same cache updates), then in each top
layer the stream rows against the main stream's keys and values, through a stand-in cache that
hands attention the cached keys plus the streams' own and stores nothing. The conversation's
cache therefore only ever receives main-stream positions.
"""
from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.predgen.layerwise import decoder_layout_unsupported

STREAMS_CONFIG = "streams.json"
STREAMS_WEIGHTS = "streams.safetensors"


@dataclass(frozen=True)
class StreamsSpec:
    """streams: gamma, speculative streams per position (the draft length they propose).
    layers: top decoder layers that carry the streams (multi-stream attention).
    rank: rank of the stream-only low-rank adapters on those layers' linear maps (0: none, the
        streams then differ from the main stream by their embeddings alone)."""
    streams: int = 3
    layers: int = 2
    rank: int = 0

    def __post_init__(self):
        if not 1 <= self.streams <= 16:
            raise ForesayError("speculative streams: streams must lie in 1..16")
        if self.layers < 1 or self.rank < 0:
            raise ForesayError("speculative streams: layers must be >= 1 and rank >= 0")


class StreamHeads(torch.nn.Module):
    """What Speculative Streaming adds to a model: the stream identifier embeddings and, with
    `rank` > 0, low-rank adapters that act on the stream rows only (so the main stream stays the
    model's own: the paper's lossless mode, base weights frozen). Adapter `a` / `b` of a linear
    map are keyed "<layer>__<module path with __ for dots>"."""

    def __init__(self, spec: StreamsSpec, hidden_size: int, adapters: dict[str, tuple[int, int]] | None = None):
        super().__init__()
        self.spec = spec
        self.embeddings = torch.nn.Parameter(torch.zeros(spec.streams, hidden_size))
        self.a = torch.nn.ParameterDict({k: torch.nn.Parameter(torch.zeros(i, spec.rank))
                                         for k, (i, o) in (adapters or {}).items()})
        self.b = torch.nn.ParameterDict({k: torch.nn.Parameter(torch.zeros(spec.rank, o))
                                         for k, (i, o) in (adapters or {}).items()})
        self._targets: dict[int, list] = {}

    @classmethod
    def random(cls, spec: StreamsSpec, hidden_size: int, std: float = 0.5, seed: int = 0,
               model=None) -> "StreamHeads":
        """Random embeddings; with `spec.rank` the adapters of `model`'s top layers start as a
        random `a` and a zero `b` (no effect until trained)."""
        adapters = adapter_shapes(model, spec) if spec.rank else {}
        heads = cls(spec, hidden_size, adapters)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            heads.embeddings.copy_(torch.randn(spec.streams, hidden_size, generator=generator) * std)
            for key, a in heads.a.items():
                a.copy_(torch.randn(a.shape, generator=generator) / a.shape[0] ** 0.5)
        return heads

    def save(self, folder: Path) -> None:
        from safetensors.torch import save_file
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STREAMS_CONFIG).write_text(json.dumps(asdict(self.spec), indent=2) + "\n")
        tensors = {"embeddings": self.embeddings}
        tensors |= {f"a.{k}": v for k, v in self.a.items()} | {f"b.{k}": v for k, v in self.b.items()}
        save_file({k: v.detach().float().contiguous() for k, v in tensors.items()}, str(folder / STREAMS_WEIGHTS))

    @classmethod
    def load(cls, folder: Path) -> "StreamHeads":
        from safetensors.torch import load_file
        try:
            spec = StreamsSpec(**json.loads((folder / STREAMS_CONFIG).read_text()))
            tensors = load_file(str(folder / STREAMS_WEIGHTS))
            embeddings = tensors["embeddings"]
            shapes = {k[2:]: (v.shape[0], tensors["b." + k[2:]].shape[1]) for k, v in tensors.items()
                      if k.startswith("a.")}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ForesayError(f"the stream parameters in {folder} cannot be read: {exc}") from None
        if embeddings.shape[0] != spec.streams or bool(shapes) != bool(spec.rank):
            raise ForesayError(f"{folder / STREAMS_WEIGHTS} does not match {STREAMS_CONFIG}")
        heads = cls(spec, embeddings.shape[1], shapes)
        heads.load_state_dict({"embeddings": embeddings} | {k: v for k, v in tensors.items() if k != "embeddings"})
        return heads

    @contextmanager
    def adapting(self, layer: torch.nn.Module, index: int, first: int = 0):
        """While open, `layer`'s linear maps add their stream adapters to what they return for
        rows `first` onwards (the stream rows)."""
        targets = self._targets.get(id(layer))
        if targets is None:  # found once per layer: walking the modules on every pass costs
            targets = self._targets[id(layer)] = [
                (module, self.a[key], self.b[key]) for name, module in layer.named_modules()
                if isinstance(module, torch.nn.Linear) and (key := f"{index}__{name.replace('.', '__')}") in self.a]
        def adapted(a, b):
            def hook(module, args, out):
                if not first:
                    return out + (args[0] @ a) @ b
                # in place: only the joint pass (run time, no gradients) has `first` > 0
                out[:, first:] += (args[0][:, first:] @ a) @ b
                return out
            return hook

        hooks = [module.register_forward_hook(adapted(a, b)) for module, a, b in targets]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()


def adapter_shapes(model, spec: StreamsSpec) -> dict[str, tuple[int, int]]:
    """(in, out) of every linear map in the top `spec.layers` decoder layers, by adapter key."""
    if model is None:
        raise ForesayError("speculative streams: adapters need the model they adapt")
    layers = model.model.layers[:model.config.num_hidden_layers]
    top = len(layers) - spec.layers
    return {f"{top + i}__{name.replace('.', '__')}": (m.in_features, m.out_features)
            for i, layer in enumerate(layers[top:]) for name, m in layer.named_modules()
            if isinstance(m, torch.nn.Linear)}


def check_model(model, spec: StreamsSpec) -> None:
    """The layer-wise pass needs a Llama/Qwen2-style decoder with full attention everywhere."""
    if not hasattr(model, "lm_head"):
        raise ForesayError(f"speculative streams: {type(model).__name__} is not a Llama/Qwen2-style decoder")
    why = decoder_layout_unsupported(model)
    if why:
        raise ForesayError(f"speculative streams cannot run {type(model).__name__}: {why}")
    if spec.layers > model.config.num_hidden_layers:
        raise ForesayError(f"speculative streams: {spec.layers} stream layers, the model has "
                           f"{model.config.num_hidden_layers}")


class _StreamView:
    """Stands in for the cache in a top layer's attention: stores the first `main` new rows' keys
    and values (the main stream's; 0: they are stored already) and returns the layer's cached ones
    followed by the streams' own, which it never stores."""

    def __init__(self, cache, main: int = 0):
        self.cache = cache
        self.main = main

    def update(self, keys, values, layer_idx, *args, **kwargs):
        if self.main:
            cached_k, cached_v = self.cache.update(keys[..., :self.main, :], values[..., :self.main, :], layer_idx)
            keys, values = keys[..., self.main:, :], values[..., self.main:, :]
        else:
            layer = self.cache.layers[layer_idx]
            cached_k, cached_v = layer.keys, layer.values
        return torch.cat([cached_k, keys], dim=-2), torch.cat([cached_v, values], dim=-2)


def joint_mask(n: int, past: int, streams: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Additive mask over [cached, main, streams] keys for the rows [main, streams]: main rows are
    causal and never see a stream; stream rows as in `stream_mask`."""
    local = _joint_local(n, streams, dtype, torch.device(device))
    return torch.cat([local.new_zeros(local.shape[0], past), local], 1)[None, None]


@lru_cache(maxsize=64)
def _joint_local(n: int, streams: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """`joint_mask` without the cached columns (all visible), made once per draft length."""
    main = torch.zeros(n, n + n * streams, dtype=dtype, device=device)
    blocked = torch.arange(n, device=device)[None, :] > torch.arange(n, device=device)[:, None]
    main[:, :n].masked_fill_(blocked, torch.finfo(dtype).min)
    main[:, n:] = torch.finfo(dtype).min
    return torch.cat([main, stream_mask(n, 0, streams, dtype, device)[0, 0]], 0)


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


def multi_stream_forward(model, heads: StreamHeads, cache, ids: torch.Tensor, joint: bool = False
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Append `ids` (batch, n) to `cache` (a transformers Cache, main stream only) and return the
    final hidden states, normed: main (batch, n, hidden), streams (batch, n, streams, hidden).
    Apply `model.lm_head` to what is needed.

    `joint`: each top layer runs the main and stream rows in one call (fewer, larger calls: faster
    where per-call overhead dominates, as on a CPU); the main rows then attend through an explicit
    mask that hides the streams, the same sums up to rounding (the lower layers stay bit-exact).
    Otherwise the main stream runs exactly as the model's own forward, the streams after it."""
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
    if not joint:
        stream_rope = inner.rotary_emb(hidden, stream_positions)
        mask = stream_mask(n, past, gamma, hidden.dtype, hidden.device)
    view = _StreamView(cache)
    streams = None
    for index, layer in enumerate(inner.layers[:model.config.num_hidden_layers]):
        if index == top:
            streams = (hidden[:, :, None, :] + heads.embeddings.to(hidden.dtype)).reshape(batch, n * gamma, -1)
            if joint:
                return _joint_top(model, heads, cache, hidden, streams, positions, stream_positions, past)
        hidden = layer(hidden, attention_mask=main_mask, position_ids=positions, past_key_values=cache,
                       use_cache=True, position_embeddings=rope)
        if streams is not None:
            with heads.adapting(layer, index) if heads.spec.rank else nullcontext():
                streams = layer(streams, attention_mask=mask, position_ids=stream_positions, past_key_values=view,
                                use_cache=True, position_embeddings=stream_rope)
    return inner.norm(hidden), inner.norm(streams).reshape(batch, n, gamma, -1)


def _joint_top(model, heads: StreamHeads, cache, hidden, streams, positions, stream_positions, past: int):
    """The top layers of a joint pass: main and stream rows in one call per layer."""
    inner = model.model
    batch, n = positions.shape
    gamma, top = heads.spec.streams, model.config.num_hidden_layers - heads.spec.layers
    rows = torch.cat([hidden, streams], 1)
    where = torch.cat([positions, stream_positions], 1)
    rope = inner.rotary_emb(rows, where)
    mask = joint_mask(n, past, gamma, rows.dtype, rows.device)
    view = _StreamView(cache, main=n)
    for index in range(top, model.config.num_hidden_layers):
        layer = inner.layers[index]
        with heads.adapting(layer, index, first=n) if heads.spec.rank else nullcontext():
            rows = layer(rows, attention_mask=mask, position_ids=where, past_key_values=view, use_cache=True,
                         position_embeddings=rope)
    rows = inner.norm(rows)
    return rows[:, :n], rows[:, n:].reshape(batch, n, gamma, -1)
