"""Loading an LLM-based recognizer (Qwen3-ASR through transformers): by hub id, folder or fixture.

A `LoadedLlmAsr` encodes audio into embeddings for its decoder and lays out the prompt the model
was trained with (Qwen3-ASR's chat format):

    <|im_start|>system\\n{context}<|im_end|>\\n<|im_start|>user\\n<|audio_start|>{audio}<|audio_end|>
    <|im_end|>\\n<|im_start|>assistant\\nlanguage {Language}<asr_text>{transcript}<|im_end|>

Everything up to the language name is the decoder's prefilled context (llm_cursor.py); the
decoded sequence starts at `<asr_text>`, followed by the forced (committed) words. The context
slot takes earlier text of the conversation, as Whisper's prompt does. The language is always
given (Qwen3-ASR would otherwise write the tag itself, before any forced words could follow it).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tokenizers import Tokenizer

from foresay.engine.asr.errors import AsrError, IncompatibleModels, InvalidAsrConfig, InvalidAudio
from foresay.engine.asr.cursor import CacheCursor
from foresay.engine.asr.llm.cursor import LlmCursor
from foresay.engine.asr.whisper.models import ATTENTIONS, DTYPES, SAMPLE_RATE, check_audio
from foresay.engine.errors import ModelUnavailable

LLM_WINDOW_SECONDS = 30.0  # the streaming transcriber's window; Qwen3-ASR itself takes minutes
# Qwen3-ASR's languages (its processor's table): codes map to the names the model was trained on.
LANGUAGES = {"ar": "Arabic", "yue": "Cantonese", "zh": "Chinese", "cs": "Czech", "da": "Danish", "nl": "Dutch",
             "en": "English", "fil": "Filipino", "fi": "Finnish", "fr": "French", "de": "German", "el": "Greek",
             "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
             "ko": "Korean", "mk": "Macedonian", "ms": "Malay", "fa": "Persian", "pl": "Polish",
             "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "es": "Spanish", "sv": "Swedish",
             "th": "Thai", "tr": "Turkish", "vi": "Vietnamese"}


def language_name(language: str) -> str:
    """'en', 'English' or 'english' -> 'English'; an unknown language is an error."""
    names = {name.lower(): name for name in LANGUAGES.values()}
    found = LANGUAGES.get(language.lower()) or names.get(language.lower())
    if found is None:
        raise InvalidAsrConfig(f"Qwen3-ASR does not know the language {language!r}; use one of "
                               f"{', '.join(sorted(LANGUAGES.values()))} (or their codes)")
    return found


@dataclass(frozen=True)
class LlmAsrModelConfig:
    """Which LLM-based recognizer to load and how."""
    name: str  # hub id (Qwen/Qwen3-ASR-1.7B), local folder, fixture (tiny-random-qwen3-asr) or demo model
    device: str = "cpu"
    dtype: str = "float32"  # float32 | float16 | bfloat16
    attention: str = "sdpa"  # eager | sdpa (both take the tree verifier's additive mask)
    language: str = "English"  # the transcript's language (name or code)
    fixture_root: Path | None = None  # where fixtures and converted checkpoints are built; None: the user cache

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidAsrConfig("an LLM-based ASR model name, folder or fixture name is required")
        if self.dtype not in DTYPES:
            raise InvalidAsrConfig(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.attention not in ATTENTIONS:
            raise InvalidAsrConfig(f"attention must be one of {', '.join(ATTENTIONS)}, not {self.attention!r}")
        language_name(self.language)


@dataclass(frozen=True)
class PromptLayout:
    """Token ids of the prompt around the audio, read from the tokenizer by their text."""
    size: int  # rows of the model's output layer
    first_special: int  # <|endoftext|>: every id from here on is special or padding
    end: int  # <|im_end|>: the end of the transcript
    asr_text: int  # <asr_text>: the decoded sequence's first token
    head: tuple[int, ...]  # <|im_start|>system\n
    before_audio: tuple[int, ...]  # <|im_end|>\n<|im_start|>user\n<|audio_start|>
    after_audio: tuple[int, ...]  # <|audio_end|><|im_end|>\n<|im_start|>assistant\nlanguage X
    vocab_digest: str  # a hash of the whole vocabulary: drafts must share it

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer, model_vocab_size: int, language: str) -> "PromptLayout":
        def need(name: str) -> int:
            token_id = tokenizer.token_to_id(name)
            if token_id is None:
                raise AsrError(f"the tokenizer has no {name} token: is this a Qwen3-ASR tokenizer?")
            return token_id

        def ids(text: str) -> tuple[int, ...]:
            return tuple(tokenizer.encode(text, add_special_tokens=False).ids)

        for name in ("<|im_start|>", "<|audio_start|>", "<|audio_end|>"):
            need(name)
        vocab = sorted(tokenizer.get_vocab(with_added_tokens=True).items())
        return cls(size=model_vocab_size, first_special=need("<|endoftext|>"), end=need("<|im_end|>"),
                   asr_text=need("<asr_text>"), head=ids("<|im_start|>system\n"),
                   before_audio=ids("<|im_end|>\n<|im_start|>user\n<|audio_start|>"),
                   after_audio=ids(f"<|audio_end|><|im_end|>\n<|im_start|>assistant\nlanguage {language_name(language)}"),
                   vocab_digest=hashlib.sha256(repr(vocab).encode()).hexdigest()[:16])

    def decoder_prefix(self, forced: Sequence[int] = ()) -> list[int]:
        return [self.asr_text, *forced]

    def check_same(self, other: "PromptLayout") -> None:
        if self != other:
            raise IncompatibleModels("the draft and target LLM-based recognizers do not share a vocabulary "
                                     "and prompt; pick a pair of one family, e.g. Qwen3-ASR 0.6B + 1.7B")


@dataclass(frozen=True)
class LlmRules:
    """What greedy decoding may pick: text tokens and <|im_end|>. Both of the model's end tokens
    end the transcript, so <|endoftext|> counts as <|im_end|> (its logit folds into it); every
    other special token, and the output layer's padding rows, are banned."""
    size: int
    end: int
    alt_end: int
    banned: tuple[int, ...]

    @classmethod
    def for_layout(cls, layout: PromptLayout) -> "LlmRules":
        banned = tuple(t for t in range(layout.first_special, layout.size) if t != layout.end)
        return cls(size=layout.size, end=layout.end, alt_end=layout.first_special, banned=banned)

    @cached_property
    def _bias(self) -> torch.Tensor:
        bias = torch.zeros(self.size)
        bias[list(self.banned)] = float("-inf")
        return bias

    def apply(self, logits: torch.Tensor, first_generated: torch.Tensor) -> torch.Tensor:
        """Masked copy of `logits` [n, vocab] (`first_generated` is unused: no begin rules)."""
        folded = logits.clone()
        folded[:, self.end] = torch.maximum(logits[:, self.end], logits[:, self.alt_end])
        return folded + self._bias.to(logits.device, logits.dtype)


@dataclass
class LoadedLlmAsr:
    """An LLM-based recognizer ready to decode."""
    model: object  # Qwen3ASRForConditionalGeneration, in eval mode
    tokenizer: Tokenizer
    layout: PromptLayout
    rules: LlmRules
    feature_extractor: object  # Qwen3ASRFeatureExtractor
    folder: Path
    window_seconds: float = LLM_WINDOW_SECONDS

    @property
    def device(self) -> torch.device:
        return self.model.device

    def features(self, audio: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-mel features [1, mels, frames] of 16 kHz mono audio and their validity mask."""
        audio = check_audio(audio)
        if len(audio) > self.window_seconds * SAMPLE_RATE:
            raise InvalidAudio(f"{len(audio) / SAMPLE_RATE:.1f} s of audio is more than the "
                               f"{self.window_seconds:g} s window; the streaming transcriber trims it")
        out = self.feature_extractor(audio, sampling_rate=SAMPLE_RATE, padding="longest",
                                     return_attention_mask=True, return_tensors="pt")
        return out.input_features.to(self.device, self.model.dtype), out.attention_mask.to(self.device)

    @torch.inference_mode()
    def encode(self, audio: np.ndarray, features: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Audio embeddings [n, hidden] in the decoder's input space (encoder + projector);
        `features`: this model's `features(audio)` when already computed (`encode_both`)."""
        features, mask = features if features is not None else self.features(audio)
        return self.model.model.get_audio_features(features.to(self.model.dtype), mask).pooler_output

    @cached_property
    def _extractor_settings(self) -> dict:
        return self.feature_extractor.to_dict()

    @torch.inference_mode()
    def context(self, audio_embeds: torch.Tensor, prompt: Sequence[int] = ()) -> torch.Tensor:
        """Input embeddings [n, hidden] of everything before the decoded sequence."""
        layout = self.layout
        embed = self.model.model.get_input_embeddings()
        before = torch.tensor([*layout.head, *prompt, *layout.before_audio], device=self.device)
        after = torch.tensor(layout.after_audio, device=self.device)
        return torch.cat([embed(before), audio_embeds.to(self.model.dtype), embed(after)])

    def cursor(self, audio_embeds: torch.Tensor, prompt: Sequence[int] = (), model=None,
               draft: bool = False) -> CacheCursor:
        """A decoder cursor with the audio and prompt prefilled (`model`: a stand-in decoder
        sharing this one's embeddings, for tests; `draft`: a drafting cursor, see LlmCursor).
        A model with a captured decoder (`engine/asr/llm/captured.py`) decodes through it, unless
        drafting or its context does not fit there."""
        model = model if model is not None else self.model
        context = self.context(audio_embeds, prompt)
        captured = getattr(model, "foresay_captured", None)
        if captured is not None and not draft and captured.fits(context):
            from foresay.engine.asr.captured import StaticCursor

            return StaticCursor(captured, context)
        return LlmCursor(model, context, draft)


def encode_both(target: LoadedLlmAsr, draft: LoadedLlmAsr, audio: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Both models' audio embeddings, with the log-mel features computed once when the two read
    the same features (the demo pair does; a pair that does not gets two computations)."""
    features = target.features(audio)
    same = draft._extractor_settings == target._extractor_settings and draft.device == target.device
    return target.encode(audio, features), draft.encode(audio, features if same else None)


def load_llm_asr(config: LlmAsrModelConfig) -> LoadedLlmAsr:
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration

    from foresay.engine.asr.llm.loading import resolve_llm_folder

    folder = resolve_llm_folder(config)
    try:
        model = Qwen3ASRForConditionalGeneration.from_pretrained(
            folder, dtype=DTYPES[config.dtype], attn_implementation=config.attention)
        feature_extractor = Qwen3ASRFeatureExtractor.from_pretrained(folder)
    except (OSError, ValueError, TypeError) as exc:
        raise ModelUnavailable(f"cannot load a Qwen3-ASR model from {folder}: {exc}") from exc
    model.to(config.device).eval()
    tokenizer = _tokenizer(folder)
    layout = PromptLayout.from_tokenizer(tokenizer, model.config.text_config.vocab_size, config.language)
    return LoadedLlmAsr(model=model, tokenizer=tokenizer, layout=layout, rules=LlmRules.for_layout(layout),
                        feature_extractor=feature_extractor, folder=folder)


def _tokenizer(folder: Path) -> Tokenizer:
    if (folder / "tokenizer.json").exists():
        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    from transformers import AutoTokenizer  # vocab.json + merges.txt, as Qwen's repositories ship it

    try:
        return AutoTokenizer.from_pretrained(folder).backend_tokenizer
    except (OSError, ValueError, AttributeError) as exc:
        raise ModelUnavailable(f"{folder} has no usable tokenizer (tokenizer.json or vocab.json + "
                               f"merges.txt): {exc}") from exc
