"""Offline Qwen3-ASR fixtures: the real architecture (transformers' Qwen3ASRForConditionalGeneration)
in a tiny configuration, random weights, with a byte-level BPE vocabulary trained offline and
Qwen3-ASR's special tokens.

`tiny-random-qwen3-asr` is the target; `tiny-random-qwen3-asr-draft` is the same network with its
last decoder layer's output projection perturbed, so it agrees with the target most of the time
but not always (as the Whisper fixtures do). Built deterministically from a seed in seconds into
a folder laid out like a hub checkout, so the ordinary loading path reads them. The init is
much wider than transformers' default (0.02), and the output layer is not tied to the
embeddings: otherwise a random decoder repeats one token whatever it hears.

`qwen3-asr-1.7b-random` and `qwen3-asr-0.6b-random` have the shapes of Qwen3-ASR 1.7B and 0.6B
(the shapes of `foresay.app.bench.llm_asr_pass_timing`: a 151,936-row output layer, a small
tokenizer), random weights at transformers' usual scale, stored in bfloat16: GPU pass costs
without a download. They hear nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from foresay.engine.asr.errors import AsrError
from foresay.engine.asr.whisper.fixtures import _built_once, _perturbed, build_device, default_fixture_root

FORMAT_VERSION = "1"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>",
            "<|audio_pad|>", "<asr_text>"]  # Qwen3-ASR's, in its order: text tokens come first


@dataclass(frozen=True)
class LlmFixtureRecipe:
    """How one fixture is made."""
    seed: int
    text_tokens: int = 500  # BPE vocabulary before the special tokens
    vocab_rows: int = 512  # output layer rows (the rest after the specials is padding, as in Qwen)
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 128
    audio_d_model: int = 64
    audio_layers: int = 2
    audio_heads: int = 4
    audio_ffn: int | None = None  # None: twice audio_d_model
    audio_downsample: int = 16  # the encoder's convolution channels
    head_dim: int | None = None  # None: hidden // heads
    init_std: float = 1.0
    perturb_from: str | None = None
    perturb_std: float = 0.0  # noise relative to each perturbed tensor's own standard deviation
    perturb_prefix: str = "model.language_model.layers.1.mlp.down_proj."
    weights_dtype: str = "float32"  # stored precision
    build_on_gpu: bool = False  # initialized on a GPU where there is one (full-size shapes: seconds, not minutes)


LLM_FIXTURES: dict[str, LlmFixtureRecipe] = {
    "tiny-random-qwen3-asr": LlmFixtureRecipe(seed=1234),
    "tiny-random-qwen3-asr-draft": LlmFixtureRecipe(seed=4321, perturb_from="tiny-random-qwen3-asr",
                                                    perturb_std=0.15),
    "qwen3-asr-1.7b-random": LlmFixtureRecipe(seed=17, vocab_rows=151936, hidden=2048, layers=28, heads=16,
                                              kv_heads=8, ffn=6144, head_dim=128, audio_d_model=1024,
                                              audio_layers=24, audio_heads=16, audio_ffn=4096, audio_downsample=480,
                                              init_std=0.02, weights_dtype="bfloat16", build_on_gpu=True),
    "qwen3-asr-0.6b-random": LlmFixtureRecipe(seed=6, vocab_rows=151936, hidden=1024, layers=28, heads=16,
                                              kv_heads=8, ffn=3072, head_dim=128, audio_d_model=896,
                                              audio_layers=18, audio_heads=14, audio_ffn=3584, audio_downsample=480,
                                              init_std=0.02, weights_dtype="bfloat16", build_on_gpu=True),
}


def is_llm_fixture(name: str) -> bool:
    return name in LLM_FIXTURES


def llm_fixture_folder(name: str, root: Path | None = None) -> Path:
    """The fixture's folder under `root`, built on first use."""
    if name not in LLM_FIXTURES:
        raise AsrError(f"unknown LLM-ASR fixture {name!r}; the fixtures are {', '.join(LLM_FIXTURES)}")
    root = Path(root) if root is not None else default_fixture_root()
    folder = root / f"{name}-v{FORMAT_VERSION}"
    return _built_once(folder, "model.safetensors", lambda out: _build(LLM_FIXTURES[name], out, root))


def build_tokenizer(text_tokens: int, seed: int = 0, corpus: list[str] | None = None):
    """Byte-level BPE with Qwen2's pre-tokenizer, trained on `corpus` (default: the LLM fixtures'
    pseudo-English), then Qwen3-ASR's special tokens appended after the text tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    from foresay.engine.llm.fixtures import QWEN_SPLIT_PATTERN, fixture_corpus

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=text_tokens, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(fixture_corpus(seed) if corpus is None else corpus, trainer=trainer)
    tok.add_special_tokens(SPECIALS)
    return tok


def qwen3_asr_config(tokenizer, recipe: LlmFixtureRecipe):
    from transformers import Qwen3ASRConfig

    ids = {name: tokenizer.token_to_id(name) for name in SPECIALS}
    if tokenizer.get_vocab_size() > recipe.vocab_rows:
        raise AsrError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens, more than the "
                       f"{recipe.vocab_rows} output rows")
    return Qwen3ASRConfig(
        audio_config=dict(num_mel_bins=128, encoder_layers=recipe.audio_layers,
                          encoder_attention_heads=recipe.audio_heads,
                          encoder_ffn_dim=recipe.audio_ffn or 2 * recipe.audio_d_model, d_model=recipe.audio_d_model,
                          output_dim=recipe.hidden, n_window=50, n_window_infer=800,
                          downsample_hidden_size=recipe.audio_downsample, initializer_range=recipe.init_std),
        text_config=dict(model_type="qwen3", vocab_size=recipe.vocab_rows, hidden_size=recipe.hidden,
                         intermediate_size=recipe.ffn, num_hidden_layers=recipe.layers,
                         num_attention_heads=recipe.heads, num_key_value_heads=recipe.kv_heads,
                         head_dim=recipe.head_dim or recipe.hidden // recipe.heads, max_position_embeddings=4096,
                         tie_word_embeddings=False, initializer_range=recipe.init_std,
                         pad_token_id=ids["<|im_end|>"], eos_token_id=[ids["<|endoftext|>"], ids["<|im_end|>"]]),
        audio_token_id=ids["<|audio_pad|>"], pad_token_id=ids["<|im_end|>"],
        eos_token_id=[ids["<|endoftext|>"], ids["<|im_end|>"]], initializer_range=recipe.init_std,
        tie_word_embeddings=False)


def _build(recipe: LlmFixtureRecipe, out: Path, root: Path) -> None:
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration

    out.mkdir(parents=True)
    if recipe.perturb_from is not None:
        base = llm_fixture_folder(recipe.perturb_from, root)
        model = _perturbed(Qwen3ASRForConditionalGeneration.from_pretrained(base), recipe)
        (out / "tokenizer.json").write_bytes((base / "tokenizer.json").read_bytes())
    else:
        tokenizer = build_tokenizer(recipe.text_tokens)
        torch.manual_seed(recipe.seed)
        with torch.device(build_device(recipe.build_on_gpu)):
            model = Qwen3ASRForConditionalGeneration(qwen3_asr_config(tokenizer, recipe)).eval()
        tokenizer.save(str(out / "tokenizer.json"))
    model.to(getattr(torch, recipe.weights_dtype)).save_pretrained(out)
    Qwen3ASRFeatureExtractor().save_pretrained(out)
