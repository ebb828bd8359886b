"""Captured Whisper decoder passes: static buffers and fixed pass shapes, CUDA graphs on a GPU.

`CapturedDecoder` belongs to one Whisper model: the self-attention keys and values of the tokens
decoded so far live in buffers of the decoder's full length, the cross-attention keys and values
of the current audio window in buffers loaded once per window, and every pass is one of a few
row counts (padded), so on CUDA each is a graph replayed in one launch (`engine.llm.cuda_graphs`).
`StaticCursor` has `DecoderCursor`'s surface (sync, extend, tree, keep_path, drop_tree), so greedy
decoding and SpecASR run on it unchanged; `make_cursor` picks it for a model that has one.

With one row count (the default) every pass has the same shape, so a position's logits do not
depend on how many tokens shared its pass: the greedy reference and SpecASR's verification see
the same numbers on any device (see engine/llm/static_cache.py for the argument).
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from foresay.engine.asr.cursor import DecoderCursor
from foresay.engine.asr.errors import AsrError
from foresay.engine.llm.cuda_graphs import graph_pool, make_pass

EXACT_ROWS = (32,)  # one shape: a draft chain of 24 plus the pending tokens fits one pass


class SlotCache(DynamicCache):
    """Self-attention keys and values written in place at the pass's buffer slots."""

    def __init__(self, layers: int, shape: tuple, dtype, device):
        super().__init__()
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.write_at: torch.Tensor | None = None

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.keys[layer_idx].index_copy_(2, self.write_at, key_states)
        self.values[layer_idx].index_copy_(2, self.write_at, value_states)
        return self.keys[layer_idx], self.values[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0  # positions are always passed explicitly


class PassShape:
    def __init__(self, owner: "StaticPasses", rows: int):
        device = owner.device
        self.rows = rows
        self.ids = torch.zeros((1, rows), dtype=torch.long, device=device)
        self.positions = torch.zeros((1, rows), dtype=torch.long, device=device)
        self.slots = torch.arange(owner.length - rows, owner.length, device=device)  # scratch slots while capturing
        self.mask = torch.zeros((1, 1, rows, owner.length), dtype=owner.dtype, device=device)
        self.run = make_pass(partial(owner._forward, self), device, owner.pool, capture=owner.graphs)


class StaticPasses:
    """Fixed-shape passes over static self-attention buffers: `run` pads a pass to the smallest
    row count that holds it and masks, over the whole buffer, what each row may see. Subclasses
    build `self_cache` (a SlotCache), `shapes`, `length`, `rows`, `device`, `dtype` and
    `_forward`. `slot_offset` entries at the start of the buffers (a prefilled context) come
    before slot 0 of every pass and are seen by every row."""

    slot_offset = 0
    max_positions: int

    def __init__(self, model, rows: tuple[int, ...], slots: int, capture: bool = True):
        """Room for `slots` buffer entries besides the rows of the largest pass (scratch while
        capturing), rounded up to 16. `capture` False: eager passes on CUDA too (the kernels a
        profiler can see)."""
        self.model, self.rows = model, tuple(sorted(rows))
        self.device, self.dtype = model.device, model.dtype
        self.length = -(-(slots + max(self.rows)) // 16) * 16
        self.graphs = capture and self.device.type == "cuda" and torch.cuda.is_available()
        self.pool = graph_pool(self.device)
        self.loaded: torch.Tensor | None = None

    @torch.inference_mode()
    def run(self, tokens: Sequence[int], positions: Sequence[int], first_slot: int,
            allowed: torch.Tensor) -> torch.Tensor:
        """One pass: `tokens` at `positions`, written at slots first_slot..; `allowed` [n, first_slot + n]
        says which slots each row sees. Returns float32 logits [n, vocab]."""
        n, offset = len(tokens), self.slot_offset
        fitting = [r for r in self.rows if r >= n]
        if not fitting:
            raise AsrError(f"internal: a {n}-token decoder pass exceeds the captured {max(self.rows)} rows")
        shape = self.shapes[fitting[0]]
        rows = shape.rows
        if offset + first_slot + rows > self.length:
            raise AsrError(f"the decoder sequence would exceed {self.max_positions} tokens")
        mask = torch.zeros((rows, self.length), dtype=torch.bool)
        mask[:n, :offset] = True
        mask[:n, offset:offset + first_slot + n] = allowed
        pad = torch.arange(n, rows)
        mask[pad, offset + first_slot + pad] = True  # a padding row sees itself: no empty softmax
        bias = torch.zeros((rows, self.length), dtype=self.dtype).masked_fill(~mask, torch.finfo(self.dtype).min)
        shape.mask[0, 0].copy_(bias)
        shape.ids[0].copy_(torch.tensor(list(tokens) + [0] * (rows - n)))
        shape.positions[0].copy_(torch.tensor([offset + p for p in positions] + [0] * (rows - n)))
        shape.slots.copy_(torch.arange(offset + first_slot, offset + first_slot + rows))
        return shape.run()[:n].float()


class CapturedDecoder(StaticPasses):
    """One Whisper's decoder with static buffers and captured passes."""

    def __init__(self, model, rows: tuple[int, ...] = EXACT_ROWS, audio_frames: int | None = None,
                 capture: bool = True):
        config = model.config
        self.max_positions = int(config.max_target_positions)
        super().__init__(model, rows, self.max_positions, capture)
        heads = config.decoder_attention_heads
        head_dim = config.d_model // heads
        frames = audio_frames or int(config.max_source_positions)
        layers = config.decoder_layers
        with torch.inference_mode():
            self.self_cache = SlotCache(layers, (1, heads, self.length, head_dim), self.dtype, self.device)
            cross = DynamicCache()
            blank = torch.zeros((1, heads, frames, head_dim), dtype=self.dtype, device=self.device)
            for i in range(layers):
                cross.update(blank, blank, i)
                cross.layers[i].keys, cross.layers[i].values = blank.clone(), blank.clone()
            self.cache = EncoderDecoderCache(self.self_cache, cross)
            self.cache.is_updated = {i: True for i in range(layers)}
            self.cross = cross
            self.encoder_stub = torch.zeros((1, 1, config.d_model), dtype=self.dtype, device=self.device)
            self.shapes = {r: PassShape(self, r) for r in self.rows}

    @torch.inference_mode()
    def load(self, encoder_out: torch.Tensor) -> None:
        """Compute the window's cross-attention keys and values into the static buffers."""
        if self.loaded is encoder_out:
            return
        for i, layer in enumerate(self.model.model.decoder.layers):
            attn = layer.encoder_attn
            shape = (1, -1, attn.num_heads, attn.head_dim)
            k = attn.k_proj(encoder_out).view(shape).transpose(1, 2)
            v = attn.v_proj(encoder_out).view(shape).transpose(1, 2)
            if k.shape != self.cross.layers[i].keys.shape:
                raise AsrError(f"encoder output of {k.shape[2]} frames; the captured decoder holds "
                               f"{self.cross.layers[i].keys.shape[2]}")
            self.cross.layers[i].keys.copy_(k)
            self.cross.layers[i].values.copy_(v)
        self.loaded = encoder_out

    def _forward(self, shape: PassShape) -> torch.Tensor:
        self.self_cache.write_at = shape.slots
        hidden = self.model.model.decoder(
            input_ids=shape.ids, encoder_hidden_states=self.encoder_stub, past_key_values=self.cache,
            position_ids=shape.positions, attention_mask=shape.mask, use_cache=True).last_hidden_state
        return self.model.proj_out(hidden)[0]


class StaticCursor(DecoderCursor):
    """DecoderCursor's surface over static passes (one cursor per decoder at a time): a Whisper's
    CapturedDecoder with the window's encoder output, or an LLM recognizer's captured decoder
    (engine/asr/llm/captured.py) with its prefilled context."""

    def __init__(self, captured: StaticPasses, source: torch.Tensor) -> None:
        self.model = captured.model
        self.encoder_out = source
        self.captured = captured
        captured.load(source)
        self.cached: list[int] = []
        self.passes = 0
        self._tree_nodes = 0

    @property
    def max_positions(self) -> int:
        return self.captured.max_positions

    def extend(self, tokens: Sequence[int]) -> torch.Tensor:
        self._no_open_tree()
        start, n = len(self.cached), len(tokens)
        allowed = torch.ones((n, start + n), dtype=torch.bool).tril(start)
        logits = self._pass(list(tokens), list(range(start, start + n)), start, allowed)
        self.cached.extend(tokens)
        return logits

    def tree(self, tokens, parents, root_context):
        self._no_open_tree()
        n, past = len(tokens), len(self.cached)
        allowed = torch.zeros(n, past + n, dtype=torch.bool)
        positions = [0] * n
        for i, parent in enumerate(parents):
            if parent >= i:
                raise AsrError(f"tree node {i} has parent {parent}; parents must come first")
            if parent < 0:
                if not 0 <= root_context[i] <= past:
                    raise AsrError(f"tree root {i} follows {root_context[i]} cache entries; the cache has {past}")
                allowed[i, :root_context[i]] = True
                positions[i] = root_context[i]
            else:
                allowed[i] = allowed[parent]
                positions[i] = positions[parent] + 1
            allowed[i, past + i] = True
        logits = self._pass(tokens, positions, past, allowed)
        self._tree_nodes = n
        self._tree_tokens = list(tokens)
        return logits, torch.tensor(positions)

    @torch.inference_mode()
    def keep_path(self, nodes: Sequence[int]) -> None:
        past = len(self.cached)
        if nodes:
            first = self.captured.slot_offset + past
            source = torch.tensor([first + i for i in nodes], device=self.captured.device)
            for buffers in (self.captured.self_cache.keys, self.captured.self_cache.values):
                for buffer in buffers:
                    buffer[:, :, first:first + len(nodes)] = buffer.index_select(2, source)
        self.cached.extend(self._tree_tokens[i] for i in nodes)
        self._tree_nodes = 0

    def drop_tree(self) -> None:
        self._tree_nodes = 0

    def _crop(self, length: int) -> None:
        self._no_open_tree()
        del self.cached[length:]

    def _pass(self, tokens, positions, first_slot, allowed) -> torch.Tensor:
        """Run the nodes in chunks of the largest shape, in order: a later chunk's rows see the
        earlier chunks' slots through `allowed`, so a chain or a tree splits without change."""
        if not tokens:
            raise AsrError("internal: a decoder pass needs at least one token")
        if max(positions) >= self.max_positions:
            raise AsrError(f"the decoder sequence would exceed {self.max_positions} tokens")
        step = max(self.captured.rows)
        out = []
        for a in range(0, len(tokens), step):
            b = min(a + step, len(tokens))
            out.append(self.captured.run(tokens[a:b], positions[a:b], first_slot + a,
                                         allowed[a:b, :first_slot + b]))
            self.passes += 1
        return torch.cat(out) if len(out) > 1 else out[0]


class CapturedEncoder:
    """The encoder's one fixed-shape pass (a full window of mel frames), captured."""

    def __init__(self, model):
        config = model.config
        self.model = model
        self.features = torch.zeros((1, config.num_mel_bins, 2 * config.max_source_positions),
                                    dtype=model.dtype, device=model.device)
        with torch.inference_mode():
            self.run = make_pass(self._forward, model.device, graph_pool(model.device),
                                 capture=model.device.type == "cuda" and torch.cuda.is_available())

    def _forward(self) -> torch.Tensor:
        return self.model.model.encoder(self.features).last_hidden_state

    @torch.inference_mode()
    def __call__(self, features: torch.Tensor) -> torch.Tensor:
        self.features.copy_(features)
        return self.run().clone()  # the next window overwrites the static output


def encode(model, features: torch.Tensor) -> torch.Tensor:
    """The encoder output: through the captured encoder when one is attached."""
    encoder = getattr(model, "foresay_encoder", None)
    if encoder is not None:
        return encoder(features)
    with torch.inference_mode():
        return model.model.encoder(features).last_hidden_state


def make_cursor(model, encoder_out: torch.Tensor) -> DecoderCursor:
    """The model's captured cursor when one is attached (`attach`), else the dynamic one."""
    captured = getattr(model, "foresay_captured", None)
    return StaticCursor(captured, encoder_out) if captured is not None else DecoderCursor(model, encoder_out)


def attach(model, rows: tuple[int, ...] = EXACT_ROWS) -> CapturedDecoder:
    """Give `model` a captured decoder and encoder, which `make_cursor` and `encode` then use."""
    captured = CapturedDecoder(model, rows)
    model.foresay_captured = captured
    model.foresay_encoder = CapturedEncoder(model)
    return captured
