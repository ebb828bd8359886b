"""The one place that builds the LLM backend from its settings: a model in this process
(transformers, with the cache the settings and device allow) or a served one (an
OpenAI-compatible server)."""
from __future__ import annotations

import logging
import pickle
import struct
from pathlib import Path

import torch

from foresay.engine.errors import ForesayError, ModelUnavailable
from foresay.engine.llm.config import LLMConfig
from foresay.engine.llm.fixtures import FIXTURES, random_init_model
from foresay.engine.llm.model import ChatLM, pick_device, pick_dtype
from foresay.engine.llm.server import ServerLM, connect_server_llm
from foresay.engine.llm.sources import (declared_history_turns, gguf_error, load_tokenizer, model_offline_hint,
                                        resolve_model_source)
from foresay.engine.llm.static_cache import choose_cache

log = logging.getLogger(__name__)


def load_llm(config: LLMConfig) -> ChatLM | ServerLM:
    """Load the model and tokenizer named by `config` on the chosen device and dtype; with
    backend "openai", connect to the server instead (a ServerLM with the same text surface)."""
    if config.backend == "openai":
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
            raise gguf_error(exc, source, gguf_file) from None
        if Path(source).exists():
            raise ModelUnavailable(f"could not load the model in {source}: {exc}") from None
        raise ModelUnavailable(model_offline_hint(config.model)) from None
    except pickle.UnpicklingError as exc:   # torch refuses pickled weights it cannot load safely
        raise ModelUnavailable(f"could not load the model in {source}: its weights are a pickled "
                               f"pytorch_model.bin that torch refuses to load safely ({str(exc).splitlines()[0]}); "
                               f"use the model's .safetensors weights, or convert them") from None
    except (ValueError, ImportError, KeyError, RuntimeError, struct.error, EOFError) as exc:
        if not gguf_file:
            raise
        raise gguf_error(exc, source, gguf_file) from None
    model.to(device).eval()
    limit = getattr(model.config, "max_position_embeddings", None) or 32768
    max_context = min(config.max_context or limit, limit, 32768)
    turns = config.max_history_turns
    if turns is None and Path(source).is_dir():
        turns = declared_history_turns(source)
    cache = choose_cache(config.cache, device, model.config)
    if config.split == "on" and not (cache == "static" and config.exact):
        raise ForesayError("LLM config: split = 'on' needs the static cache in exact mode (cache = 'static', "
                           f"exact = true); this model runs the {cache} cache{'' if config.exact else ', not exact'}")
    lm = ChatLM(model, tokenizer, device, dtype, max_context, config.model, turns, cache, config.exact, config.split)
    if config.fuse == "on" or (config.fuse == "auto" and device.type == "cuda"):
        if cache == "static":
            lm.fuse()
        elif config.fuse == "on":
            raise ForesayError("LLM config: fuse = 'on' needs the static cache (cache = 'static', or 'auto' "
                               f"where the model allows it); this model runs the {cache} cache")
    log.info("loaded %s, %s cache, history %s", lm.description, cache,
             "as much as fits" if turns is None else f"{turns} earlier turn(s)")
    return lm
