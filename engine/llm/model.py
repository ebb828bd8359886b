"""A chat model loaded in this process: forward passes over a KV cache, and how long they took.

Decoding policy lives elsewhere (`engine.llm.decoding`, `engine.predgen`); this module only knows
how to get per-position logits for new tokens appended to a cache. `engine.llm.backend` loads it.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import torch

from foresay.engine.errors import ForesayError
from foresay.engine.llm.cache import ForwardStats, KVCache
from foresay.engine.llm.chat_text import ChatText
from foresay.engine.llm.config import DTYPES
from foresay.engine.llm.dynamic_cache import DynamicKVCache
from foresay.engine.llm.static_cache import StaticEngine

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ForesayError(f"device {name!r} asked for, but torch sees no CUDA GPU "
                           f"(torch {torch.__version__}; a CPU-only build?)")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ForesayError("device 'mps' asked for, but Metal is not available")
    return torch.device(name)


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name != "auto":
        return DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.float32


class ChatLM(ChatText):
    """A loaded causal LM with its tokenizer and chat template.

    max_history_turns: earlier turns the model handles in its context (None: as many as fit)."""

    def __init__(self, model, tokenizer, device: torch.device, dtype: torch.dtype, max_context: int,
                 name: str, max_history_turns: int | None = None, cache: str = "dynamic", exact: bool = True,
                 split: str = "auto"):
        self.model = model
        self.device = device
        self.dtype = dtype
        self.max_context = max_context
        self.max_history_turns = max_history_turns
        self.stats = ForwardStats()
        self._sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.cache_kind = cache  # "static" | "dynamic": what kv_cache() makes
        self.exact = exact
        self.split = split  # "auto" | "on" | "off": the static engine's split attention (llm.split)
        self.warmup_seconds: float | None = None
        self.fusion = None  # what `fuse` compiled (engine.llm.fusion.Fusion), None: the plain model
        self._static = None
        super().__init__(tokenizer, name, (getattr(model, "generation_config", None), model.config))

    # --- compute ---------------------------------------------------------------------------

    def kv_cache(self) -> KVCache:
        """A new KV cache for a conversation, of the kind chosen at load time (llm.cache)."""
        if self.cache_kind == "static":
            return self.static_engine().kv_cache()
        return DynamicKVCache(self)

    def static_engine(self) -> StaticEngine:
        if self._static is None:
            self._static = StaticEngine(self, self.exact, self.split)
        return self._static

    def drop_static_engine(self) -> None:
        """Forget the static engine and its captured passes (after the model's modules changed):
        the next `static_engine()` builds and captures anew."""
        self._static = None

    def fuse(self) -> None:
        """Compile the decoder's small operations into fused kernels (`engine.llm.fusion`); they
        compile in the next warm-up, which falls back to the plain model if that fails."""
        from foresay.engine.llm.fusion import fuse_decoder

        self.fusion = fuse_decoder(self)

    def transformers_cache(self):
        """transformers' own empty cache for this model (what `DynamicKVCache` wraps)."""
        from transformers import DynamicCache
        return DynamicCache(config=self.model.config)

    @property
    def description(self) -> str:
        """One line for the log and the benchmark: name, architecture, size, dtype, device, context."""
        params = sum(p.numel() for p in self.model.parameters())
        arch = getattr(self.model.config, "model_type", "?")
        system = "" if self.system_role else ", system prompt in the first user message"
        return (f"{self.name} ({arch}, {_count(params)} parameters, "
                f"{str(self.dtype).removeprefix('torch.')} on {self.device}, "
                f"context {self.max_context} tokens{system})")

    @contextmanager
    def counted_pass(self, positions: int):
        """Count the (possibly partial) forward pass run inside in the model's statistics: its
        time up to the device's completion, one pass, `positions` positions."""
        start = time.perf_counter()
        yield
        self._sync()
        self.stats.seconds += time.perf_counter() - start
        self.stats.passes += 1
        self.stats.tokens += positions

    @torch.inference_mode()
    def forward(self, cache, ids: list[int], keep_logits: int) -> torch.Tensor:
        """Append `ids` to `cache`; return float32 logits of the last `keep_logits` positions."""
        with self.counted_pass(len(ids)):
            input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
            out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True,
                             logits_to_keep=keep_logits)
            logits = out.logits[0].float()
        return logits

    @torch.inference_mode()
    def warmup(self) -> float:
        """One prefill and one step, so first-use costs (allocations, kernels, and with the static
        cache the capture of its passes) precede 'ready'. Returns (and logs) the seconds taken."""
        start = time.perf_counter()
        if self.cache_kind == "static":
            try:
                self.static_engine().warmup()
            except Exception as exc:  # a compiler missing or failing: any error, from a fused model only
                if self.fusion is None:
                    raise
                from foresay.engine.llm.fusion import unfuse_decoder

                log.warning("LLM fusion failed in the warm-up (%s: %s); running the plain model",
                            type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                unfuse_decoder(self)
                self.fusion = None
                self.static_engine().warmup()
        else:
            cache = self.transformers_cache()
            ids = self.encode("Hello, how are you today?") or [0]
            logits = self.forward(cache, ids, 1)
            self.forward(cache, [int(logits[-1].argmax())], 1)
        self.warmup_seconds = time.perf_counter() - start
        log.info("LLM warm-up (%s cache%s%s): %.2f s", self.cache_kind,
                 ", exact" if self.exact and self.cache_kind == "static" else "",
                 ", fused" if self.fusion is not None else "", self.warmup_seconds)
        return self.warmup_seconds


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
