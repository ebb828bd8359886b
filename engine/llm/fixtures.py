"""Built-in model fixtures: random Qwen2-architecture chat models with a tokenizer trained offline.

`tiny-random` (a few hundred thousand parameters) serves correctness tests; `small-random` (tens
of millions, a forward pass of several milliseconds on CPU) serves overhead measurements. Both are
built deterministically from a seed and cached on disk, then loaded through the same path as any
hub or local model. Their init is wider than transformers' default, so that greedy decoding
wanders over the vocabulary instead of repeating one token and argmax margins stay clear of
floating-point noise.
"""
from __future__ import annotations

import json
import logging
import os
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FIXTURE_VERSION = 1

# Qwen2.5's chat template, trimmed to the roles Foresay uses.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Gemma 2's chat template: no system role (a system message raises), <bos> first.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
GEMMA_SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]
# Qwen2's pre-tokenizer split pattern (AutoTokenizer rebuilds a qwen2 tokenizer with it).
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class FixtureSpec:
    """Shape of a random fixture model."""
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    init_std: float
    max_positions: int = 4096
    weights_on_disk: bool = True  # False: only config and tokenizer are written; the model is
                                  # initialized at load time on its device (full-size shapes)
    arch: str = "qwen2"           # qwen2 | gemma3 (sliding-window layers, no system role)
    sliding_window: int | None = None


FIXTURES = {
    "tiny-random": FixtureSpec("tiny-random", vocab_size=1024, hidden_size=64, intermediate_size=160,
                               num_layers=2, num_heads=4, num_kv_heads=2, init_std=0.5),
    "small-random": FixtureSpec("small-random", vocab_size=4096, hidden_size=512, intermediate_size=1536,
                                num_layers=8, num_heads=8, num_kv_heads=2, init_std=0.1),
    # Gemma-3 architecture: sliding-window layers (a window of 8 tokens, so every reused or
    # cropped cache crosses it) between full-attention ones, and a template without system role.
    "tiny-sliding": FixtureSpec("tiny-sliding", vocab_size=1024, hidden_size=64, intermediate_size=160,
                                num_layers=4, num_heads=4, num_kv_heads=2, init_std=0.5,
                                arch="gemma3", sliding_window=8),
    # Qwen2.5-7B-Instruct's shapes with random weights, for GPU timing without a download.
    "qwen2.5-7b-random": FixtureSpec("qwen2.5-7b-random", vocab_size=152064, hidden_size=3584,
                                     intermediate_size=18944, num_layers=28, num_heads=28, num_kv_heads=4,
                                     init_std=0.02, max_positions=32768, weights_on_disk=False),
}
TOKENIZER_VOCAB_LIMIT = 8192  # fixture tokenizers stay small; a larger model vocabulary is padding

_WORDS = (
    "the a an and or but if then so because when while what which who how why where is are was "
    "were be been have has had do does did can could will would should may might must not no yes "
    "i you he she it we they me him her us them my your his its our their this that these those "
    "time day week year hour minute today tomorrow morning evening night weather rain sun wind "
    "cold warm hot city country world home house room water food coffee tea music song book story "
    "question answer help please thanks thank hello hi good great fine well very really just "
    "about after before over under between into from with without for of to in on at by up down "
    "set timer alarm remind call message send play stop start open close turn light lights on off "
    "one two three four five six seven eight nine ten hundred thousand first second last next "
    "make take give get know think want need like love see look find tell say ask explain write "
    "travel trip plan email report data idea problem way people person friend family work school "
    "Paris London Tokyo Berlin Monday Friday Sunday January March December Foresay assistant"
).split()
_PUNCT = [".", ".", "?", "!", ",", ",", ";", ":"]


def fixture_corpus(seed: int, n_lines: int = 3000) -> list[str]:
    """Deterministic pseudo-English lines to train the fixture tokenizer on."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 16))]
        words[0] = words[0].capitalize()
        text = " ".join(words) + rng.choice(_PUNCT)
        if rng.random() < 0.2:
            text += f" {rng.randint(0, 2000)}.{rng.randint(0, 99)}"
        if rng.random() < 0.1:
            text += " Café, naïve, straße, 東京, ü é ñ"
        lines.append(text)
    return lines


def build_tokenizer(vocab_size: int, seed: int, corpus: list[str] | None = None,
                    special_tokens: list[str] = SPECIAL_TOKENS):
    """Train a byte-level BPE tokenizer with Qwen2's normalizer and pre-tokenizer on `corpus`
    (default: the fixtures' pseudo-English lines drawn from `seed`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(fixture_corpus(seed) if corpus is None else corpus, trainer=trainer)
    return tok


def fixture_dir(name: str, seed: int = 0) -> Path:
    root = os.environ.get("FORESAY_FIXTURE_DIR")
    if not root:
        try:
            from platformdirs import user_cache_dir
            cache = Path(user_cache_dir("foresay"))
        except ImportError:  # a bare GPU image (`foresay bench gpu`) may lack platformdirs
            cache = Path.home() / ".cache" / "foresay"
        root = cache / "fixtures"
    return Path(root) / f"{name}-seed{seed}-v{FIXTURE_VERSION}"


def ensure_fixture(name: str, seed: int = 0) -> Path:
    """Return the folder of fixture `name`, building it first if needed (seconds)."""
    if name not in FIXTURES:
        raise KeyError(name)
    target = fixture_dir(name, seed)
    if (target / "FIXTURE.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        _write_fixture(FIXTURES[name], seed, Path(tmp))
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "FIXTURE.json").exists():  # not a concurrent builder's copy
                raise
        else:
            os.makedirs(tmp, exist_ok=True)  # TemporaryDirectory cleans up a path that must exist
    log.info("built fixture %s at %s", name, target)
    return target


def save_chat_tokenizer(tok, out: Path):
    """Save a trained `tokenizers.Tokenizer` as a transformers chat tokenizer (Qwen's template)."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def qwen2_config(spec: FixtureSpec, tok):
    """A Qwen2 config of `spec`'s shape whose special ids are `tok`'s."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions, initializer_range=spec.init_std,
        tie_word_embeddings=False, rope_theta=10000.0,
        bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
        pad_token_id=tok.token_to_id("<|endoftext|>"))


def gemma3_fixture(spec: FixtureSpec, seed: int, out: Path):
    """A Gemma-3 text config of `spec`'s shape (sliding and full layers alternating) and its
    tokenizer with Gemma's special tokens and system-less template, saved to `out`."""
    from transformers import Gemma3TextConfig, PreTrainedTokenizerFast

    tok = build_tokenizer(min(spec.vocab_size, TOKENIZER_VOCAB_LIMIT), seed,
                          special_tokens=GEMMA_SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        additional_special_tokens=["<start_of_turn>", "<end_of_turn>"])
    fast.chat_template = GEMMA_CHAT_TEMPLATE
    fast.save_pretrained(out)
    ids = {t: tok.token_to_id(t) for t in GEMMA_SPECIAL_TOKENS}
    return Gemma3TextConfig(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.hidden_size // spec.num_heads, query_pre_attn_scalar=spec.hidden_size // spec.num_heads,
        sliding_window=spec.sliding_window,
        layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(spec.num_layers)],
        max_position_embeddings=spec.max_positions, initializer_range=spec.init_std,
        tie_word_embeddings=False, bos_token_id=ids["<bos>"], pad_token_id=ids["<pad>"],
        eos_token_id=[ids["<eos>"], ids["<end_of_turn>"]])


def _write_fixture(spec: FixtureSpec, seed: int, out: Path) -> None:
    import torch
    from transformers import Gemma3ForCausalLM, Qwen2ForCausalLM

    model_class = Qwen2ForCausalLM
    if spec.arch == "gemma3":
        config, model_class = gemma3_fixture(spec, seed, out), Gemma3ForCausalLM
    else:
        tok = build_tokenizer(min(spec.vocab_size, TOKENIZER_VOCAB_LIMIT), seed)
        save_chat_tokenizer(tok, out)
        config = qwen2_config(spec, tok)
    if spec.weights_on_disk:
        torch.manual_seed(seed)
        model_class(config).eval().save_pretrained(out)
    else:
        config.save_pretrained(out)
    (out / "FIXTURE.json").write_text(json.dumps({"name": spec.name, "seed": seed, "version": FIXTURE_VERSION,
                                                  "weights_on_disk": spec.weights_on_disk}))


def random_init_model(folder, dtype, device, seed: int = 0):
    """The model of a fixture without weights on disk, initialized on `device` in `dtype`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
