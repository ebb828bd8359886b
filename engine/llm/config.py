"""The chat model's settings: which model, where it runs, which cache and backend."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from foresay.engine.errors import ForesayError

FLAGSHIP_MODEL = "Qwen/Qwen2.5-7B-Instruct"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
BACKENDS = ("transformers", "openai")


@dataclass(frozen=True)
class LLMConfig:
    """How to load the chat model.

    model: a hub id (e.g. "Qwen/Qwen2.5-7B-Instruct"), a local folder, a `.gguf` file, a built-in
        fixture name ("tiny-random", "small-random", "tiny-sliding") or "demo" (the small chat model
        trained in-house). With backend "openai": the model name the server serves.
    backend: "transformers" (in this process) or "openai" (an OpenAI-compatible completions
        server: vLLM, SGLang, llama.cpp; see engine.llm.server).
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
    fuse: static cache only: the decoder's norms, MLPs and rotary embeddings compiled into fused
        kernels before the capture (`engine.llm.fusion`): "auto" (on CUDA), "on" or "off". A
        warm-up that fails to compile them warns and runs the plain model.
    split: static cache, exact mode only: attention split along the keys into fixed chunks and
        merged (`engine.llm.split_attention`): "auto" (on CUDA), "on" (also on a CPU) or "off". A
        device whose kernels fail the warm-up's check attends in one call, with a warning.
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
    fuse: str = "auto"
    split: str = "auto"
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
        if self.dtype not in ("auto", *DTYPES):
            raise ForesayError(f"LLM config: dtype {self.dtype!r} is not one of auto, {', '.join(DTYPES)}")
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
        if self.fuse not in ("auto", "on", "off"):
            raise ForesayError(f"LLM config: fuse {self.fuse!r} is not one of auto, on, off")
        if self.split not in ("auto", "on", "off"):
            raise ForesayError(f"LLM config: split {self.split!r} is not one of auto, on, off")
        if self.backend not in BACKENDS:
            raise ForesayError(f"LLM config: backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == "openai" and not (self.base_url or "").startswith(("http://", "https://")):
            raise ForesayError("LLM config: backend 'openai' needs base_url, e.g. http://host:8000/v1")
        if self.gguf_file is not None and not self.gguf_file.endswith(".gguf"):
            raise ForesayError(f"LLM config: gguf_file {self.gguf_file!r} is not a .gguf file name")
        if self.timeout_s <= 0:
            raise ForesayError("LLM config: timeout_s must be positive")
