"""Offline Whisper fixtures: tiny random models with Whisper's real English vocabulary.

`tiny-random` is the target; `tiny-random-draft` is the same network with its weights
perturbed, so a draft agrees with the target most of the time but not always (a realistic
acceptance pattern for tests and `foresay bench asr`). Both are built deterministically from a
seed into a folder laid out like a hub checkout (weights, generation config, tokenizer.json,
preprocessor_config.json), so the ordinary loading path reads them.

`medium.en-random` and `tiny.en-random` have the shapes of the English Whisper checkpoints
SpecASR pairs, random weights at transformers' usual scale, stored in float16: GPU pass costs
without a download (the GPU kit's replay and SpecASR finals). They hear nothing.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from foresay.engine.asr.errors import AsrError

# OpenAI's Whisper BPE vocabulary (MIT), shipped as package data so wheels and the bundle have it.
VOCAB_FILE = Path(str(resources.files("foresay.assets").joinpath("whisper_vocab", "gpt2.tiktoken")))
FORMAT_VERSION = "1"  # bump when the fixtures' recipe changes, so stale builds are rebuilt


@dataclass(frozen=True)
class FixtureRecipe:
    """How one fixture is made."""
    seed: int
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    ffn: int = 128
    init_std: float = 1.0  # with transformers' default 0.02 a random Whisper repeats one token
    perturb_from: str | None = None  # build by adding noise to this fixture's weights
    perturb_std: float = 0.0  # noise relative to each tensor's own standard deviation
    # Only the last decoder layer's output projection is perturbed: keys and values stay the
    # target's, so the draft's logits are the target's plus a small context-dependent error and
    # it disagrees where the target itself is unsure (a random network amplifies any earlier
    # change chaotically and would disagree everywhere).
    perturb_prefix: str = "model.decoder.layers.1.fc2."
    weights_dtype: str = "float32"  # stored precision (float16 halves a full-size fixture's disk)
    build_on_gpu: bool = False  # initialized on a GPU where there is one (full-size shapes: seconds, not minutes)


FIXTURES: dict[str, FixtureRecipe] = {
    "tiny-random": FixtureRecipe(seed=1234),
    "tiny-random-draft": FixtureRecipe(seed=4321, perturb_from="tiny-random", perturb_std=0.15),
    "medium.en-random": FixtureRecipe(seed=1024, d_model=1024, layers=24, heads=16, ffn=4096, init_std=0.02,
                                      weights_dtype="float16", build_on_gpu=True),
    "tiny.en-random": FixtureRecipe(seed=384, d_model=384, layers=4, heads=6, ffn=1536, init_std=0.02,
                                    weights_dtype="float16", build_on_gpu=True),
}


def default_fixture_root() -> Path:
    from platformdirs import user_cache_dir
    return Path(os.environ.get("FORESAY_FIXTURE_DIR") or Path(user_cache_dir("foresay")) / "fixtures")


def is_fixture(name: str) -> bool:
    return name in FIXTURES


def fixture_folder(name: str, root: Path | None = None) -> Path:
    """The fixture's folder under `root`, built on first use."""
    if name not in FIXTURES:
        raise AsrError(f"unknown ASR fixture {name!r}; the fixtures are {', '.join(FIXTURES)}")
    root = Path(root) if root is not None else default_fixture_root()
    folder = root / f"{name}-v{FORMAT_VERSION}"
    return _built_once(folder, "model.safetensors", lambda out: _build(name, FIXTURES[name], out, root))


def _built_once(folder: Path, marker: str, build) -> Path:
    """`folder`, made by `build(path)` unless it already holds `marker`. Built in a staging folder
    and renamed, so concurrent callers see a complete folder or build their own and keep the first."""
    if (folder / marker).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build(staging / "out")
        try:
            (staging / "out").rename(folder)
        except OSError:
            if not (folder / marker).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _build(name: str, recipe: FixtureRecipe, out: Path, root: Path) -> None:
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    from foresay.engine.asr.whisper.tiktoken_vocab import build_english_tokenizer

    if not VOCAB_FILE.exists():
        raise AsrError(f"the Whisper vocabulary for the test fixtures is missing ({VOCAB_FILE}); "
                       "fixtures need a source checkout of Foresay")
    tokenizer = build_english_tokenizer(VOCAB_FILE)
    ids = tokenizer.get_vocab()
    out.mkdir(parents=True)
    if recipe.perturb_from is not None:
        base = WhisperForConditionalGeneration.from_pretrained(fixture_folder(recipe.perturb_from, root))
        model = _perturbed(base, recipe)
    else:
        config = WhisperConfig(
            vocab_size=tokenizer.get_vocab_size(), num_mel_bins=80, d_model=recipe.d_model,
            encoder_layers=recipe.layers, decoder_layers=recipe.layers,
            encoder_attention_heads=recipe.heads, decoder_attention_heads=recipe.heads,
            encoder_ffn_dim=recipe.ffn, decoder_ffn_dim=recipe.ffn, init_std=recipe.init_std,
            max_source_positions=1500, max_target_positions=448,
            pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|endoftext|>"], decoder_start_token_id=ids["<|startoftranscript|>"],
            suppress_tokens=[], begin_suppress_tokens=[ids["Ġ"], ids["<|endoftext|>"]])
        torch.manual_seed(recipe.seed)
        with torch.device(build_device(recipe.build_on_gpu)):
            model = WhisperForConditionalGeneration(config).eval()
    generation = model.generation_config
    generation.suppress_tokens = _non_speech_tokens(tokenizer)
    generation.begin_suppress_tokens = [ids["Ġ"], ids["<|endoftext|>"]]
    generation.decoder_start_token_id = ids["<|startoftranscript|>"]
    generation.no_timestamps_token_id = ids["<|notimestamps|>"]
    generation.is_multilingual = False
    model.to(getattr(torch, recipe.weights_dtype)).save_pretrained(out)
    tokenizer.save(str(out / "tokenizer.json"))
    WhisperFeatureExtractor(feature_size=80).save_pretrained(out)


def build_device(on_gpu: bool) -> str:
    """Where a fixture is initialized: a full-size one on the GPU when there is one."""
    return "cuda" if on_gpu and torch.cuda.is_available() else "cpu"


def _perturbed(model, recipe: FixtureRecipe):
    generator = torch.Generator().manual_seed(recipe.seed)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.startswith(recipe.perturb_prefix) and tensor.is_floating_point():
                noise = torch.randn(tensor.shape, generator=generator)
                tensor.add_(noise * tensor.std() * recipe.perturb_std)
    return model.eval()


def _non_speech_tokens(tokenizer) -> list[int]:
    """Single tokens for symbols that are never speech (speaker tags, music notes, brackets)."""
    symbols = list('"#()*+/:;<=>@[\\]^_`{|}~') + ["<<", ">>", "--", "♪♪"]
    found = set()
    for symbol in symbols:
        for text in (symbol, " " + symbol):
            encoded = tokenizer.encode(text, add_special_tokens=False).ids
            if len(encoded) == 1:
                found.add(encoded[0])
    return sorted(found)


def ctranslate2_folder(name: str, root: Path | None = None, quantization: str = "int8") -> Path:
    """The fixture converted for faster-whisper (CTranslate2), built on first use."""
    source = fixture_folder(name, root)
    folder = source.parent / f"{source.name}-ct2-{quantization}"

    def convert(out: Path) -> None:
        import ctranslate2.converters

        converter = ctranslate2.converters.TransformersConverter(
            str(source), copy_files=["tokenizer.json", "preprocessor_config.json"])
        converter.convert(str(out), quantization=quantization)

    return _built_once(folder, "model.bin", convert)
