"""Loading a Whisper through transformers: by hub id, local folder or fixture name."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from foresay.engine.asr.errors import InvalidAsrConfig, InvalidAudio
from foresay.engine.asr.whisper.fixtures import fixture_folder, is_fixture
from foresay.engine.asr.vocab import SuppressionRules, WhisperVocab
from foresay.engine.model_registry import (SHIPPED_WHISPER as DEMO_WHISPER, hub_speech_folder,
                                          shipped_model_dir as demo_model_dir)
from foresay.engine.errors import ModelUnavailable

SAMPLE_RATE = 16_000
WINDOW_SECONDS = 30.0
ATTENTIONS = ("eager", "sdpa")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class WhisperModelConfig:
    """Which Whisper to load and how."""
    name: str  # hub id (openai/whisper-tiny.en), local folder, fixture (tiny-random, tiny-random-draft)
    #            or demo model (demo, demo-draft: trained in-house on espeak-ng speech)
    device: str = "cpu"  # torch device string
    dtype: str = "float32"  # float32 | float16 | bfloat16
    attention: str = "sdpa"  # eager | sdpa (both take the tree verifier's additive mask)
    fixture_root: Path | None = None  # where fixtures are built; None: the user cache

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidAsrConfig("a Whisper model name, folder or fixture name is required")
        if self.dtype not in DTYPES:
            raise InvalidAsrConfig(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.attention not in ATTENTIONS:
            raise InvalidAsrConfig(f"attention must be one of {', '.join(ATTENTIONS)}, not {self.attention!r}")


@dataclass
class LoadedWhisper:
    """A Whisper ready to decode: network, tokenizer, special tokens and suppression rules."""
    model: object  # WhisperForConditionalGeneration, in eval mode
    tokenizer: Tokenizer
    vocab: WhisperVocab
    rules: SuppressionRules
    feature_extractor: object  # WhisperFeatureExtractor
    folder: Path

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_target_positions)

    @property
    def window_seconds(self) -> float:
        """The audio one encoder pass covers (30 s for OpenAI's models; shorter for demo models)."""
        frames = 2 * int(self.model.config.max_source_positions)
        return frames * self.feature_extractor.hop_length / SAMPLE_RATE

    def features(self, audio: np.ndarray) -> torch.Tensor:
        """Log-mel features of up to one window (30 s for OpenAI's models) of 16 kHz mono audio,
        padded to the full window."""
        audio = check_audio(audio)
        if len(audio) > self.window_seconds * SAMPLE_RATE:
            raise InvalidAudio(f"{len(audio) / SAMPLE_RATE:.1f} s of audio does not fit this Whisper's "
                               f"{self.window_seconds:g} s window; the streaming transcriber trims it")
        frames = 2 * int(self.model.config.max_source_positions)
        out = self.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt",
                                     padding="max_length", max_length=frames * self.feature_extractor.hop_length)
        return out.input_features.to(self.device, self.model.dtype)

    @torch.inference_mode()
    def encode(self, audio: np.ndarray) -> torch.Tensor:
        from foresay.engine.asr.captured import encode  # a captured encoder on CUDA, if attached
        return encode(self.model, self.features(audio))


def check_audio(audio) -> np.ndarray:
    array = np.asarray(audio)
    if array.ndim != 1:
        raise InvalidAudio(f"audio must be mono samples (1-D), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise InvalidAudio(f"audio must be float samples in [-1, 1], got {array.dtype}")
    if not np.isfinite(array).all():
        raise InvalidAudio("audio contains NaN or infinite samples")
    return array.astype(np.float32, copy=False)


def resolve_folder(config: WhisperModelConfig) -> Path:
    if is_fixture(config.name):
        return fixture_folder(config.name, config.fixture_root)
    if config.name in DEMO_WHISPER:
        return demo_model_dir(config.name, DEMO_WHISPER)
    path = Path(config.name).expanduser()
    if path.is_dir():
        return path
    if path.exists() or config.name.startswith((".", "/", "~")):
        raise ModelUnavailable(f"{config.name} is not a Whisper model folder")
    return hub_speech_folder(config.name, "Whisper model")


def load_whisper(config: WhisperModelConfig) -> LoadedWhisper:
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    folder = resolve_folder(config)
    if not (folder / "tokenizer.json").exists():
        raise ModelUnavailable(f"{folder} has no tokenizer.json; Foresay needs the fast tokenizer file")
    try:
        model = WhisperForConditionalGeneration.from_pretrained(
            folder, dtype=DTYPES[config.dtype], attn_implementation=config.attention)
        feature_extractor = WhisperFeatureExtractor.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot load a Whisper from {folder}: {exc}") from exc
    model.to(config.device).eval()
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    generation = model.generation_config
    multilingual = bool(getattr(generation, "is_multilingual", model.config.vocab_size >= 51865))
    vocab = WhisperVocab.from_tokenizer(tokenizer, model.config.vocab_size, multilingual)
    rules = SuppressionRules.for_model(vocab, getattr(generation, "suppress_tokens", None),
                                       getattr(generation, "begin_suppress_tokens", None))
    return LoadedWhisper(model=model, tokenizer=tokenizer, vocab=vocab, rules=rules,
                         feature_extractor=feature_extractor, folder=folder)
