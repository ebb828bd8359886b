"""Write a small transformers Qwen2 model as a GGUF file (float32 or float16, unquantized).

Foresay reads GGUF through transformers; this writer exists so that a GGUF can be made offline
from the demo chat model or a fixture (for the llama.cpp server tests and benchmarks) without
llama.cpp's converter, which refuses tokenizers it does not know by hash. The tokenizer is stored
as llama.cpp's "gpt2" BPE with the "qwen2" pre-tokenizer, which is the split the fixtures and
the demo model use.

    python -m foresay.engine.llm.gguf_export demo demo-chat.gguf
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from foresay.engine.errors import ForesayError

_TOKEN_NORMAL, _TOKEN_CONTROL = 1, 3


def _vocab(folder: Path, vocab_size: int):
    """Tokens by id (padded to the model's vocabulary), their types and the BPE merges."""
    data = json.loads((folder / "tokenizer.json").read_text("utf-8"))
    if data["model"]["type"] != "BPE":
        raise ForesayError(f"{folder}: only byte-level BPE tokenizers are written, not {data['model']['type']}")
    by_id = {i: t for t, i in data["model"]["vocab"].items()}
    special = set()
    for added in data.get("added_tokens", []):
        by_id[added["id"]] = added["content"]
        if added.get("special"):
            special.add(added["id"])
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(vocab_size)]
    types = [_TOKEN_CONTROL if i in special or i not in by_id else _TOKEN_NORMAL for i in range(vocab_size)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, types, merges


def export_gguf(model_folder: str | Path, out: str | Path, dtype: str = "float32") -> Path:
    """Write the Qwen2 model in `model_folder` (config, weights, tokenizer, chat template) to `out`."""
    import gguf
    import numpy as np
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, out = Path(model_folder), Path(out)
    config = AutoConfig.from_pretrained(folder)
    if config.model_type != "qwen2":
        raise ForesayError(f"{folder}: the GGUF writer knows Qwen2 models only, not {config.model_type!r}")
    if dtype not in ("float32", "float16"):
        raise ForesayError(f"GGUF dtype must be float32 or float16, not {dtype!r}")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    writer = gguf.GGUFWriter(str(out), "qwen2")
    writer.add_name(folder.name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "float32" else gguf.LlamaFileType.MOSTLY_F16)
    tokens, types, merges = _vocab(folder, config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for key, add in (("bos_token_id", writer.add_bos_token_id), ("eos_token_id", writer.add_eos_token_id),
                     ("pad_token_id", writer.add_pad_token_id)):
        value = getattr(config, key, None)
        if isinstance(value, list):
            value = value[0]
        if value is not None:
            add(int(value))
    writer.add_add_bos_token(False)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)
    state = model.state_dict()
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    for name, tensor in state.items():
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise ForesayError(f"no GGUF name for tensor {name}")
        array = tensor.detach().float().numpy()
        # llama.cpp keeps norms and biases in float32 whatever the file type
        if dtype == "float16" and array.ndim > 1:
            array = array.astype(np.float16)
        writer.add_tensor(target, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a Qwen2 model folder, or a built-in name (demo, tiny-random)")
    parser.add_argument("out", help="the .gguf file to write")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    args = parser.parse_args(argv)
    from foresay.engine.llm.config import LLMConfig
    from foresay.engine.llm.sources import resolve_model_path
    source = resolve_model_path(LLMConfig(model=args.model))
    print(export_gguf(source, args.out, args.dtype))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
