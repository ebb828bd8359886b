"""The recognizers behind one interface: transcribe a window of audio after a forced prefix.

`GreedyBackend` is the reference (Foresay's greedy loop on one Whisper), `SpecAsrBackend`
gives the same tokens faster with a draft Whisper, `FasterWhisperBackend` (faster_whisper_backend.py)
runs CTranslate2. Backends are called from one worker thread; they hold no streaming state.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from tokenizers import Tokenizer

from foresay.engine.asr.errors import InvalidAsrConfig
from foresay.engine.asr.greedy import DecodeStats, greedy_decode
from foresay.engine.asr.whisper.models import LoadedWhisper
from foresay.engine.asr.specasr import SpecConfig, speculative_decode


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]  # what follows the forced prefix, without end-of-text
    stats: DecodeStats = field(default_factory=DecodeStats)
    # the recognizer's P(a sentence ended) after its last word (whisper/sentence_end.py); None:
    # the backend does not say, and the text's own punctuation is all there is
    p_sentence_end: float | None = None
    # its P(", ; : …") there: the clause goes on (None when p_sentence_end is)
    p_goes_on: float | None = None
    # the recognizer's P(the audio holds no speech) (Whisper's no-speech token); None: not said
    p_no_speech: float | None = None
    avg_logprob: float | None = None  # the decode's mean token log-prob (Whisper's measure)


class TokenText(ABC):
    """How a backend's tokens read as text and split into words."""

    @abstractmethod
    def decode(self, tokens: Sequence[int]) -> str: ...

    @abstractmethod
    def encode(self, text: str) -> list[int]: ...

    @abstractmethod
    def is_word_start(self, token: int) -> bool: ...


class WhisperText(TokenText):
    """Byte-level BPE: a token that begins with a space begins a word."""

    def __init__(self, tokenizer: Tokenizer, first_special: int) -> None:
        self.tokenizer = tokenizer
        self.first_special = first_special

    def decode(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode([t for t in tokens if t < self.first_special])

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def is_word_start(self, token: int) -> bool:
        piece = self.tokenizer.id_to_token(token)
        return token < self.first_special and piece is not None and piece.startswith("Ġ")


class AsrBackend(ABC):
    text: TokenText
    window_seconds: float = 30.0

    @abstractmethod
    def transcribe(self, audio: np.ndarray, forced: Sequence[int] = (), prompt: Sequence[int] = (),
                   guess: Sequence[int] = ()) -> Hypothesis:
        """Greedy transcript of `audio` (16 kHz mono, at most `window_seconds`) continuing the
        `forced` tokens, conditioned on `prompt` (earlier text). `guess` is a likely
        continuation a speculative backend may check first; it never changes the result."""

    def warmup(self) -> None:
        self.transcribe(np.zeros(16_000, dtype=np.float32))


@dataclass(frozen=True)
class DecodeLimits:
    """Bounds of one decode."""
    max_new_tokens: int = 224  # Whisper's own sample length (n_text_ctx // 2)

    def __post_init__(self) -> None:
        if not 1 <= self.max_new_tokens <= 448:
            raise InvalidAsrConfig(f"max_new_tokens must be in 1..448, got {self.max_new_tokens}")


def fitted_prefix(target: LoadedWhisper, prompt: Sequence[int], forced: Sequence[int], max_new_tokens: int) -> list[int]:
    """The decoder prefix, with the prompt shortened (oldest tokens first) so that the forced
    text still leaves room for `max_new_tokens`; the prompt is the least important part."""
    bare = len(target.vocab.decoder_prefix(forced=forced))
    room_for_prompt = target.max_positions - bare - max_new_tokens - 1  # - 1: <|startofprev|>
    kept = list(prompt)[-room_for_prompt:] if room_for_prompt > 0 else []
    return target.vocab.decoder_prefix(prompt=kept, forced=forced)


class GreedyBackend(AsrBackend):
    def __init__(self, target: LoadedWhisper, limits: DecodeLimits = DecodeLimits()) -> None:
        self.target = target
        self.limits = limits
        self.window_seconds = target.window_seconds
        self.text = WhisperText(target.tokenizer, target.vocab.first_special)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        prefix = fitted_prefix(self.target, prompt, forced, self.limits.max_new_tokens)
        result = greedy_decode(self.target.model, self.target.encode(audio), prefix, self.target.rules,
                               self.target.vocab.eot, self.limits.max_new_tokens)
        return Hypothesis(result.tokens, result.stats)


class SpecAsrBackend(AsrBackend):
    """Target greedy output, drafted by a smaller Whisper of the same vocabulary."""

    def __init__(self, target: LoadedWhisper, draft: LoadedWhisper, config: SpecConfig = SpecConfig(),
                 limits: DecodeLimits = DecodeLimits()) -> None:
        target.vocab.check_same(draft.vocab)
        self.target, self.draft, self.config, self.limits = target, draft, config, limits
        self.window_seconds = min(target.window_seconds, draft.window_seconds)
        self.text = WhisperText(target.tokenizer, target.vocab.first_special)

    def transcribe(self, audio, forced=(), prompt=(), guess=()) -> Hypothesis:
        prefix = fitted_prefix(self.target, prompt, forced, self.limits.max_new_tokens)
        with torch.inference_mode():
            draft_out = self.draft.encode(audio)
        result = speculative_decode(self.target.model, self.draft.model, self.target.encode(audio), draft_out,
                                    prefix, self.target.rules, self.target.vocab.eot, self.config,
                                    self.limits.max_new_tokens, recycled=guess)
        return Hypothesis(result.tokens, result.stats)
