"""Whisper's special tokens, decoder prefixes and suppression rules, shared by every decoder.

The reference greedy loop, SpecASR's draft and its verification all apply the same
`SuppressionRules`; that is what makes speculative output equal to greedy output.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import torch
from tokenizers import Tokenizer

from foresay.engine.asr.errors import AsrError, IncompatibleModels

MAX_PROMPT_TOKENS = 223  # Whisper keeps at most n_text_ctx // 2 - 1 previous-text tokens


@dataclass(frozen=True)
class WhisperVocab:
    """Token ids Foresay needs, read from a Whisper tokenizer by their names."""
    size: int  # rows of the model's output layer
    eot: int
    sot: int
    sot_prev: int
    no_timestamps: int
    transcribe: int
    english: int | None  # None for English-only models, which take no language token
    first_special: int  # ids from here on are special (eot is the first)

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer, model_vocab_size: int, multilingual: bool) -> "WhisperVocab":
        def need(name: str) -> int:
            token_id = tokenizer.token_to_id(name)
            if token_id is None:
                raise AsrError(f"the tokenizer has no {name} token: is this a Whisper tokenizer?")
            return token_id

        eot = need("<|endoftext|>")
        return cls(size=model_vocab_size, eot=eot, sot=need("<|startoftranscript|>"),
                   sot_prev=need("<|startofprev|>"), no_timestamps=need("<|notimestamps|>"),
                   transcribe=need("<|transcribe|>"),
                   english=need("<|en|>") if multilingual else None, first_special=eot)

    def decoder_prefix(self, prompt: Sequence[int] = (), forced: Sequence[int] = ()) -> list[int]:
        """`<|startofprev|> prompt` (if any), the start-of-transcript sequence, then forced text."""
        head = [self.sot_prev, *prompt[-MAX_PROMPT_TOKENS:]] if prompt else []
        start = [self.sot] + ([self.english, self.transcribe] if self.english is not None else [])
        return [*head, *start, self.no_timestamps, *forced]

    def check_same(self, other: "WhisperVocab") -> None:
        if self != other:
            raise IncompatibleModels(
                "the draft and target Whisper models do not share a vocabulary "
                f"(target {self}, draft {other}); pick a pair of the same family, e.g. tiny.en + medium.en")


@dataclass(frozen=True)
class SuppressionRules:
    """Tokens greedy decoding may never pick, and those it may not pick first.

    Text is decoded without timestamps, so every special token except end-of-text is banned,
    as are the model's own `suppress_tokens`; at the first generated position Whisper's
    `begin_suppress_tokens` (blank, end-of-text) are banned too.
    """
    always: tuple[int, ...]
    at_begin: tuple[int, ...]

    @classmethod
    def for_model(cls, vocab: WhisperVocab, suppress_tokens: Sequence[int] | None,
                  begin_suppress_tokens: Sequence[int] | None) -> "SuppressionRules":
        specials = [t for t in range(vocab.first_special, vocab.size) if t != vocab.eot]
        always = sorted({*specials, *(t for t in suppress_tokens or () if t < vocab.size)})
        at_begin = sorted({t for t in begin_suppress_tokens or () if t < vocab.size})
        return cls(always=tuple(always), at_begin=tuple(at_begin), size=vocab.size)

    size: int = 0  # vocabulary rows the rules are applied to

    @cached_property
    def _biases_by_device(self) -> dict:
        return {}

    def _biases(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(always, at the first generated position) as additive rows, kept on `device`: a GPU's
        logits are masked there without a copy from the host per pass."""
        biases = self._biases_by_device.get(device)
        if biases is None:
            always = torch.zeros(self.size)
            always[list(self.always)] = float("-inf")
            begin = always.clone()
            begin[list(self.at_begin)] = float("-inf")
            biases = self._biases_by_device[device] = (always.to(device), begin.to(device))
        return biases

    def apply(self, logits: torch.Tensor, first_generated: torch.Tensor) -> torch.Tensor:
        """Masked copy of `logits` [n, vocab] (on any device); row i is the first generated
        position where `first_generated[i]` (bool [n], on any device) is true."""
        always, begin = self._biases(logits.device)
        bias = torch.where(first_generated.to(logits.device).unsqueeze(1), begin, always)
        return logits + bias.to(logits.dtype)
