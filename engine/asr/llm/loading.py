"""Where an LLM-based recognizer's files come from: fixture, demo model, folder or the hub.

Qwen's own hub repositories (`Qwen/Qwen3-ASR-0.6B`, `Qwen/Qwen3-ASR-1.7B`) are laid out for
Qwen's `qwen-asr` package: a `thinker_config` holding the audio and text configs, weights
under `thinker.`, the audio projector inside the audio tower, and M-RoPE fields. transformers'
`Qwen3ASRForConditionalGeneration` reads its own layout, so such a checkout is converted once
(config flattened, weights renamed shard by shard, transformers' feature extractor settings)
into Foresay's cache and loaded from there. Folders already in transformers' layout load as they are.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from foresay.engine.asr.whisper.fixtures import _built_once, default_fixture_root
from foresay.engine.asr.llm.fixtures import is_llm_fixture, llm_fixture_folder
from foresay.engine.model_registry import (SHIPPED_LLM_ASR as DEMO_LLM_ASR, SPEECH_FILES, hub_speech_folder,
                                          shipped_model_dir as demo_model_dir)
from foresay.engine.errors import ModelUnavailable

HUB_FILES = SPEECH_FILES  # the files the loader reads
# Original layout -> transformers' layout, first matching prefix wins.
WEIGHT_RENAMES = (("thinker.audio_tower.proj1.", "model.multi_modal_projector.linear_1."),
                  ("thinker.audio_tower.proj2.", "model.multi_modal_projector.linear_2."),
                  ("thinker.model.", "model.language_model."),
                  ("thinker.lm_head.", "lm_head."),
                  ("thinker.", "model."))
MROPE_KEYS = ("mrope_section", "mrope_interleaved", "interleaved", "type")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json", "chat_template.json", "chat_template.jinja")


def is_llm_asr_name(name: str) -> bool:
    """Whether `name` names an LLM-based recognizer: a fixture, demo model, Qwen3-ASR hub id, or
    a folder whose config says qwen3_asr."""
    if is_llm_fixture(name) or name in DEMO_LLM_ASR or "qwen3-asr" in name.lower():
        return True
    config = Path(name).expanduser() / "config.json"
    try:
        return config.is_file() and json.loads(config.read_text("utf-8")).get("model_type") == "qwen3_asr"
    except (OSError, ValueError):
        return False


def resolve_llm_folder(config) -> Path:
    """A folder in transformers' layout for `config.name` (an LlmAsrModelConfig)."""
    name = config.name
    if is_llm_fixture(name):
        return llm_fixture_folder(name, config.fixture_root)
    if name in DEMO_LLM_ASR:
        return demo_model_dir(name, DEMO_LLM_ASR)
    path = Path(name).expanduser()
    if path.is_dir():
        folder = path
    elif path.exists() or name.startswith((".", "/", "~")):
        raise ModelUnavailable(f"{name} is not a Qwen3-ASR model folder")
    else:
        folder = hub_speech_folder(name, "Qwen3-ASR speech recognizer")
    if is_original_layout(folder):
        root = Path(config.fixture_root) if config.fixture_root is not None else default_fixture_root().parent
        return converted_folder(folder, root / "converted")
    return folder


def is_original_layout(folder: Path) -> bool:
    try:
        return "thinker_config" in json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"{folder} has no readable config.json: {exc}") from exc


def converted_folder(source: Path, root: Path) -> Path:
    """`source` (original layout) converted into a folder under `root`, once per source path
    (a hub snapshot's path names its commit, so a new revision converts again)."""
    key = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:12]
    folder = root / f"{source.resolve().name}-{key}"
    return _built_once(folder, "config.json", lambda out: convert(source, out))


def flat_config(original: dict) -> dict:
    """transformers' Qwen3ASRConfig fields from an original config.json."""
    from dataclasses import fields

    from transformers import Qwen3ASREncoderConfig, Qwen3Config

    thinker = original["thinker_config"]
    audio = dict(thinker["audio_config"])
    text = dict(thinker["text_config"])
    rope = text.get("rope_scaling")
    if isinstance(rope, dict):  # with audio and text only, M-RoPE's three components are equal: plain RoPE
        text["rope_scaling"] = {k: v for k, v in rope.items() if k not in MROPE_KEYS}
    audio["max_position_embeddings"] = 13  # positions within one 100-frame chunk after the convolutions
    keep_audio = {f.name for f in fields(Qwen3ASREncoderConfig)}
    keep_text = {f.name for f in fields(Qwen3Config)} | {"rope_scaling", "rope_theta"}
    out = {"audio_config": {k: v for k, v in audio.items() if k in keep_audio},
           "text_config": {"model_type": "qwen3", **{k: v for k, v in text.items() if k in keep_text}}}
    for key in ("audio_token_id", "initializer_range"):
        if key in thinker:
            out[key] = thinker[key]
    for key in ("tie_word_embeddings", "pad_token_id", "eos_token_id"):
        if key in original:
            out[key] = original[key]
    return out


def renamed(key: str) -> str:
    for old, new in WEIGHT_RENAMES:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def convert(source: Path, out: Path) -> None:
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3ASRConfig, Qwen3ASRFeatureExtractor

    out.mkdir(parents=True)
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        raise ModelUnavailable(f"{source} has no .safetensors weights")
    for shard in shards:  # one shard in memory at a time
        save_file({renamed(k): v.contiguous() for k, v in load_file(shard).items()}, out / shard.name,
                  metadata={"format": "pt"})
    index = source / "model.safetensors.index.json"
    if index.exists():
        table = json.loads(index.read_text("utf-8"))
        table["weight_map"] = {renamed(k): v for k, v in table["weight_map"].items()}
        (out / index.name).write_text(json.dumps(table, indent=1))
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copyfile(source / name, out / name)
    Qwen3ASRFeatureExtractor().save_pretrained(out)
    config = Qwen3ASRConfig(**flat_config(json.loads((source / "config.json").read_text("utf-8"))))
    config.save_pretrained(out)  # written last: its presence marks a finished conversion
