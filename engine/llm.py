"""The LLM layer: load a chat model, render its chat template, run forward passes over a KV cache.

Decoding policy lives elsewhere (`engine.decoding`, `engine.predgen`); this module only knows how
to get per-position logits for new tokens appended to a cache, and how long that took.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from foresay.engine.chat_format import end_of_message_id, has_system_role, merge_system
from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.fixtures import FIXTURES, random_init_model
from foresay.engine.model_source import (_gguf_error, _offline_hint, declared_history_turns, load_tokenizer,
                                         resolve_model_source)

log = logging.getLogger(__name__)

FLAGSHIP_MODEL = "Qwen/Qwen2.5-7B-Instruct"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
BACKENDS = ("transformers", "openai")


@dataclass(frozen=True)
class LLMConfig:
    """How to load the chat model.

    model: a hub id (e.g. "Qwen/Qwen2.5-7B-Instruct"), a local folder, a `.gguf` file, a built-in
        fixture name ("tiny-random", "small-random", "tiny-sliding") or "demo" (the small chat model
        trained in-house). With backend "openai": the model name the server serves.
    backend: "transformers" (in this process) or "openai" (an OpenAI-compatible completions
        server: vLLM, SGLang, llama.cpp; see engine.llm_server).
    gguf_file: the GGUF file inside the folder or hub repository `model` (a `.gguf` path in
        `model` needs none); it is dequantized to `dtype`.
    chat_template: a Jinja chat template, or a file holding one, for a model without one (or to
        replace its own).
    base_url: the server's URL for backend "openai", e.g. "http://gpu-box:8000/v1".
    api_key_env: the environment variable holding the server's API key (the key itself is never
        in a config file or a log).
    tokenizer: where the "openai" backend finds the served model's tokenizer and chat template
        (a hub id, folder, .gguf file or built-in name); None: `model`.
    timeout_s: how long one server request may take before the turn gives up on it.
    device: "auto" (CUDA if available, else CPU), "cpu", "cuda", "cuda:N" or "mps".
    dtype: "auto" (bfloat16 on CUDA where supported, else float16 there; float32 on CPU), or a name.
    max_context: tokens the conversation may occupy; None takes the model's own limit (capped).
    max_history_turns: earlier turns kept in the model's context; None takes what the model
        declares (`foresay.json` in its folder, e.g. the demo model's: it was trained on dialogues
        of at most 3 turns), else only the context limits it.
    revision: hub revision to load.
    seed: seed of a built-in fixture.
    threads: CPU threads for torch (0 leaves torch's default).
    cache: the conversation's KV cache: "static" (preallocated to max_context, fixed-shape passes,
        captured as CUDA graphs on a GPU), "dynamic" (grows as needed), or "auto" (static on CUDA
        where the model allows it, else dynamic: on a CPU the dynamic one is faster).
    exact: static cache only: every pass has one shape, so PredGen-greedy equals greedy decoding
        bit for bit (False: one-row decode steps and bucketed verification, a little faster on a
        GPU, but near-ties may round differently between the two).
    """
    model: str = FLAGSHIP_MODEL
    device: str = "auto"
    dtype: str = "auto"
    max_context: int | None = None
    max_history_turns: int | None = None
    revision: str | None = None
    seed: int = 0
    threads: int = 0
    cache: str = "auto"
    exact: bool = True
    backend: str = "transformers"
    gguf_file: str | None = None
    chat_template: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    tokenizer: str | None = None
    timeout_s: float = 10.0

    def __post_init__(self):
        if not self.model or not self.model.strip():
            raise ForesayError("LLM config: 'model' must name a hub id, a folder or a fixture")
        if self.dtype not in ("auto", *_DTYPES):
            raise ForesayError(f"LLM config: dtype {self.dtype!r} is not one of auto, {', '.join(_DTYPES)}")
        if not (self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:")):
            raise ForesayError(f"LLM config: device {self.device!r} is not auto, cpu, cuda, cuda:N or mps")
        if self.max_context is not None and self.max_context < 64:
            raise ForesayError("LLM config: max_context must be at least 64 tokens")
        if self.threads < 0:
            raise ForesayError("LLM config: threads must be >= 0")
        if self.max_history_turns is not None and self.max_history_turns < 0:
            raise ForesayError("LLM config: max_history_turns must be >= 0")
        if self.cache not in ("auto", "static", "dynamic"):
            raise ForesayError(f"LLM config: cache {self.cache!r} is not one of auto, static, dynamic")
        if self.backend not in BACKENDS:
            raise ForesayError(f"LLM config: backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == "openai" and not (self.base_url or "").startswith(("http://", "https://")):
            raise ForesayError("LLM config: backend 'openai' needs base_url, e.g. http://host:8000/v1")
        if self.gguf_file is not None and not self.gguf_file.endswith(".gguf"):
            raise ForesayError(f"LLM config: gguf_file {self.gguf_file!r} is not a .gguf file name")
        if self.timeout_s <= 0:
            raise ForesayError("LLM config: timeout_s must be positive")


@dataclass
class ForwardStats:
    """Forward passes run by one model and the wall time they took (for overhead accounting)."""
    passes: int = 0
    tokens: int = 0
    seconds: float = 0.0


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
        return _DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.float32



class ChatText:
    """The text side of a chat model: its tokenizer, chat template and end-of-reply tokens.

    `eos_sources`: objects with an `eos_token_id` (the model's config and generation config)."""

    def __init__(self, tokenizer, name: str, eos_sources=()):
        self.tokenizer = tokenizer
        self.name = name
        self.system_role = has_system_role(tokenizer)  # False: the system prompt joins the first user message
        self.eos_ids = self._eos_ids(eos_sources)

    def _eos_ids(self, sources) -> frozenset[int]:
        ids = set()
        for source in sources:
            value = getattr(source, "eos_token_id", None)
            if value is not None:
                ids.update(value if isinstance(value, (list, tuple)) else [value])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        for special in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
            token_id = self.tokenizer.convert_tokens_to_ids(special)
            if isinstance(token_id, int) and token_id != self.tokenizer.unk_token_id and token_id >= 0:
                ids.add(token_id)
        closing = end_of_message_id(self.tokenizer, self.render)
        if closing is not None:  # a supplied template's own end of message
            ids.add(closing)
        return frozenset(ids)

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        if not self.system_role:
            messages = merge_system(messages)
            if not messages:
                return ""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([i for i in ids if i not in self.eos_ids],
                                     skip_special_tokens=True)


class ChatLM(ChatText):
    """A loaded causal LM with its tokenizer and chat template.

    max_history_turns: earlier turns the model handles in its context (None: as many as fit)."""

    def __init__(self, model, tokenizer, device: torch.device, dtype: torch.dtype, max_context: int,
                 name: str, max_history_turns: int | None = None, cache: str = "dynamic", exact: bool = True):
        self.model = model
        self.device = device
        self.dtype = dtype
        self.max_context = max_context
        self.max_history_turns = max_history_turns
        self.stats = ForwardStats()
        self._sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.cache_kind = cache  # "static" | "dynamic": what kv_cache() makes
        self.exact = exact
        self.warmup_seconds: float | None = None
        self._static = None
        super().__init__(tokenizer, name, (getattr(model, "generation_config", None), model.config))

    # --- compute ---------------------------------------------------------------------------

    def kv_cache(self):
        """A new KV cache for a conversation, of the kind chosen at load time (llm.cache)."""
        if self.cache_kind == "static":
            return self.static_engine().new_cache()
        from foresay.engine.kv import KVCache
        return KVCache(self)

    def static_engine(self):
        if self._static is None:
            from foresay.engine.kv_static import StaticEngine
            self._static = StaticEngine(self, self.exact)
        return self._static

    def new_cache(self):
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
            self.static_engine().warmup()
        else:
            cache = self.new_cache()
            ids = self.encode("Hello, how are you today?") or [0]
            logits = self.forward(cache, ids, 1)
            self.forward(cache, [int(logits[-1].argmax())], 1)
        self.warmup_seconds = time.perf_counter() - start
        log.info("LLM warm-up (%s cache%s): %.2f s", self.cache_kind,
                 ", exact" if self.exact and self.cache_kind == "static" else "", self.warmup_seconds)
        return self.warmup_seconds


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def load_llm(config: LLMConfig):
    """Load the model and tokenizer named by `config` on the chosen device and dtype; with
    backend "openai", connect to the server instead (a ServerLM with the same text surface)."""
    if config.backend == "openai":
        from foresay.engine.llm_server import connect_server_llm
        return connect_server_llm(config)
    from huggingface_hub.errors import HFValidationError
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if config.threads:
        torch.set_num_threads(config.threads)
    device = pick_device(config.device)
    dtype = pick_dtype(config.dtype, device)
    source, gguf_file = resolve_model_source(config)
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        tokenizer = load_tokenizer(config, source, gguf_file, config.model)
        if config.model in FIXTURES and not FIXTURES[config.model].weights_on_disk:
            model = random_init_model(source, dtype, device, config.seed)
        else:  # a GGUF file is dequantized to `dtype` here
            model = AutoModelForCausalLM.from_pretrained(source, revision=config.revision, dtype=dtype,
                                                         **kwargs)
    except (OSError, HFValidationError) as exc:
        if gguf_file and Path(source).exists():
            raise _gguf_error(exc, source, gguf_file) from None
        if Path(source).exists():
            raise ModelUnavailable(f"could not load the model in {source}: {exc}") from None
        raise ModelUnavailable(_offline_hint(config.model)) from None
    except (ValueError, ImportError, KeyError, RuntimeError) as exc:
        if not gguf_file:
            raise
        raise _gguf_error(exc, source, gguf_file) from None
    model.to(device).eval()
    limit = getattr(model.config, "max_position_embeddings", None) or 32768
    max_context = min(config.max_context or limit, limit, 32768)
    turns = config.max_history_turns
    if turns is None and Path(source).is_dir():
        turns = declared_history_turns(source)
    from foresay.engine.kv_static import choose_cache
    cache = choose_cache(config.cache, device, model.config)
    lm = ChatLM(model, tokenizer, device, dtype, max_context, config.model, turns, cache, config.exact)
    log.info("loaded %s, %s cache, history %s", lm.description, cache,
             "as much as fits" if turns is None else f"{turns} earlier turn(s)")
    return lm
